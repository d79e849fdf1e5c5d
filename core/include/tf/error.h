/*
 * tf/error.h - typed status codes shared by the core and every plugin.
 *
 * Functions return a tf_status: TF_OK (0) on success, a negative code on
 * failure.  The code says what kind of failure it was; the human-readable
 * detail (file, line, key, tensor name) travels separately through the host's
 * error service (tf_host.error) or, inside the core, tf_error_set().
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
const char *tf_strerror(int status);

#ifdef __cplusplus
}
#endif
#endif /* TF_ERROR_H */
