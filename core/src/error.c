/* error.c - names for the status codes of tf/error.h and the per-thread
 * failure detail of diag.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "diag.h"
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

static _Thread_local char diag_msg[2048];

int tf_diag_set(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(diag_msg, sizeof(diag_msg), fmt, ap);
	va_end(ap);
	return status;
}

int tf_diag_prefix(int status, const char *fmt, ...)
{
	char pre[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);

	/* Shift the message right to make room; the tail is cut when long. */
	size_t lp = strlen(pre), cap = sizeof(diag_msg);
	if (lp + 2 >= cap)
		return status;
	size_t lm = strnlen(diag_msg, cap - 1);
	if (lm > cap - 1 - (lp + 2))
		lm = cap - 1 - (lp + 2);
	memmove(diag_msg + lp + 2, diag_msg, lm);
	memcpy(diag_msg, pre, lp);
	diag_msg[lp] = ':';
	diag_msg[lp + 1] = ' ';
	diag_msg[lp + 2 + lm] = 0;
	return status;
}

int tf_diag_note(int status, const char *fmt, ...)
{
	size_t lm = strnlen(diag_msg, sizeof(diag_msg) - 1);
	va_list ap;
	va_start(ap, fmt);
	if (lm + 4 < sizeof(diag_msg)) {
		memcpy(diag_msg + lm, " (", 2);
		vsnprintf(diag_msg + lm + 2, sizeof(diag_msg) - lm - 3, fmt, ap);
		strcat(diag_msg, ")");
	}
	va_end(ap);
	return status;
}

const char *tf_diag_msg(void) { return diag_msg; }

void tf_diag_clear(void) { diag_msg[0] = 0; }
