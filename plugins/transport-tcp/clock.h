/*
 * clock.h - the monotonic milliseconds every transport's deadlines use.
 */
#ifndef TF_TCP_CLOCK_H
#define TF_TCP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t tf_tp_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#endif /* TF_TCP_CLOCK_H */
