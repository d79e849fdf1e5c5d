/* error.c - the per-thread failure detail of tf/diag.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tf/diag.h"

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
