/* error.c - names for the status codes of tf/error.h. */
#include "tf/error.h"

const char *tf_strerror(int status)
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
