/*
 * tf/error.h - typed status codes shared by the core and every plugin.
 *
 * Functions return a tf_status: TF_OK (0) on success, a negative code on
 * failure.  The code says what kind of failure it was; the human-readable
 * detail (file, line, key, tensor name) travels separately: a plugin records
 * it through the host's error service (tf_host.error in tf/plugin.h).
 *
 * Everything here is inline, so a plugin links against nothing to use it.
 */
#ifndef TF_ERROR_H
#define TF_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_status {
	TF_OK              = 0,
	TF_ERR_NOMEM       = -1,  /* an allocation failed */
	TF_ERR_IO          = -2,  /* a file could not be opened, read or mapped */
	TF_ERR_FORMAT      = -3,  /* a file's contents are malformed */
	TF_ERR_INVALID     = -4,  /* a bad argument or configuration value */
	TF_ERR_NOT_FOUND   = -5,  /* a named key, tensor, file or plugin is missing */
	TF_ERR_ABI         = -6,  /* a plugin was built against another ABI */
	TF_ERR_UNSUPPORTED = -7,  /* valid, but not supported by this build or machine */
	TF_ERR_RANGE       = -8,  /* a limit was exceeded (context, memory, size) */
	TF_ERR_DEVICE      = -9,  /* a device or backend failed */
	TF_ERR_PEER        = -10, /* a tensor-parallel peer failed or went away */
	TF_ERR_INTERNAL    = -11, /* an invariant broke: a bug */
} tf_status;

/* Short constant description of a status code ("out of memory", ...). */
static inline const char *tf_strerror(int status)
{
	switch ((tf_status)status) {
	case TF_OK:              return "success";
	case TF_ERR_NOMEM:       return "out of memory";
	case TF_ERR_IO:          return "input/output error";
	case TF_ERR_FORMAT:      return "malformed file";
	case TF_ERR_INVALID:     return "invalid argument";
	case TF_ERR_NOT_FOUND:   return "not found";
	case TF_ERR_ABI:         return "plugin ABI mismatch";
	case TF_ERR_UNSUPPORTED: return "not supported";
	case TF_ERR_RANGE:       return "limit exceeded";
	case TF_ERR_DEVICE:      return "device error";
	case TF_ERR_PEER:        return "peer failure";
	case TF_ERR_INTERNAL:    return "internal error";
	}
	return "unknown error";
}

#ifdef __cplusplus
}
#endif
#endif /* TF_ERROR_H */
