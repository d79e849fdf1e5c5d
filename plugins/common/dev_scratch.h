/*
 * dev_scratch.h - scratch.h's shared activation arena for device plugins:
 * one per plugin, in backend memory (tf_backend alloc), grown to the
 * largest forward and shared by every layer, header-only.
 *
 * A device plugin queues its kernels on the backend's stream and returns
 * before they run, so the next layer's kernels, queued behind them on
 * the same stream, may reuse the memory; only growing it must first wait
 * for the work queued on the old one (the backend's quiesce).  The lock
 * is held while a forward carves and queues.
 */
#ifndef TF_PLUGIN_DEV_SCRATCH_H
#define TF_PLUGIN_DEV_SCRATCH_H

#include <pthread.h>
#include <stddef.h>

#include "tf/backend.h"

typedef struct tf_dev_scratch {
	pthread_mutex_t lock;
	const tf_backend *be;           /* whose memory it is */
	void *bctx;
	void *mem;
	size_t bytes;
	int users;
} tf_dev_scratch;

#define TF_DEV_SCRATCH_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, 0, 0 }

/* Carve sizes are rounded to 256 bytes (what cudaMalloc aligns to). */
static inline size_t tf_dev_scratch_round(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* The next `bytes` of the arena at *p. */
static inline void *tf_dev_scratch_take(char **p, size_t bytes)
{
	void *r = *p;
	*p += tf_dev_scratch_round(bytes);
	return r;
}

static inline void tf_dev_scratch_ref(tf_dev_scratch *s, const tf_backend *be, void *bctx)
{
	pthread_mutex_lock(&s->lock);
	s->users++;
	s->be = be;
	s->bctx = bctx;
	pthread_mutex_unlock(&s->lock);
}

static inline void tf_dev_scratch_unref(tf_dev_scratch *s)
{
	pthread_mutex_lock(&s->lock);
	if (--s->users == 0 && s->mem) {
		s->be->quiesce(s->bctx);
		s->be->free(s->bctx, s->mem);
		s->mem = NULL;
		s->bytes = 0;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Lock the arena and return at least `bytes` of it, or NULL (and leave it
 * unlocked) when it cannot grow. */
static inline char *tf_dev_scratch_acquire(tf_dev_scratch *s, size_t bytes)
{
	pthread_mutex_lock(&s->lock);
	if (bytes > s->bytes) {
		if (s->mem) {
			s->be->quiesce(s->bctx);
			s->be->free(s->bctx, s->mem);
		}
		s->bytes = tf_dev_scratch_round(bytes);
		s->mem = s->be->alloc(s->bctx, s->bytes);
		if (!s->mem) {
			s->bytes = 0;
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
	}
	return s->mem;
}

static inline void tf_dev_scratch_release(tf_dev_scratch *s)
{
	pthread_mutex_unlock(&s->lock);
}

#endif /* TF_PLUGIN_DEV_SCRATCH_H */
