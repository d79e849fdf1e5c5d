/* fail.c - tfquant's failure detail (fail.h). */
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

#include "tf/checkpoint.h"

static char fail_msg[2048];

int tfq_fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
	va_end(ap);
	return status;
}

const char *tfq_errmsg(void)
{
	return *fail_msg ? fail_msg : tf_checkpoint_errmsg();
}
