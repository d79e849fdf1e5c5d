/*
 * scratch.h - one activation arena shared by every layer of a plugin.
 *
 * Layers run one after another, so the activations of one forward serve
 * every layer in turn; kept per layer they would cost gigabytes (63 KDA
 * layers x a 512-token prefill's projections).  Each plugin keeps one
 * static arena: layer_init takes a reference, forward holds the lock while
 * it uses the memory (which also keeps two sequences from sharing it at
 * once), and the last layer_fini frees it.
 *
 * The memory is plain host memory, 64-byte aligned: these plugins run only
 * on backends whose activations live on the host (tf_tu_probe_host_backend).
 */
#ifndef TF_PLUGIN_SCRATCH_H
#define TF_PLUGIN_SCRATCH_H

#include <pthread.h>
#include <stdlib.h>

typedef struct tf_scratch {
	pthread_mutex_t lock;
	float *mem;
	size_t floats;
	int users;
} tf_scratch;

#define TF_SCRATCH_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 }

/* Floats rounded up to whole 64-byte lines: carve buffers at these sizes
 * and each stays aligned. */
static inline size_t tf_scratch_round(size_t floats) { return (floats + 15) & ~(size_t)15; }

static inline void tf_scratch_ref(tf_scratch *s)
{
	pthread_mutex_lock(&s->lock);
	s->users++;
	pthread_mutex_unlock(&s->lock);
}

static inline void tf_scratch_unref(tf_scratch *s)
{
	pthread_mutex_lock(&s->lock);
	if (--s->users == 0) {
		free(s->mem);
		s->mem = NULL;
		s->floats = 0;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Lock the arena and return at least `floats` of it, or NULL (and leave it
 * unlocked) when it cannot grow. */
static inline float *tf_scratch_acquire(tf_scratch *s, size_t floats)
{
	pthread_mutex_lock(&s->lock);
	if (floats > s->floats) {
		free(s->mem);
		s->floats = tf_scratch_round(floats);
		s->mem = aligned_alloc(64, s->floats * sizeof(float));
		if (!s->mem) {
			s->floats = 0;
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
	}
	return s->mem;
}

static inline void tf_scratch_release(tf_scratch *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* Take `floats` (rounded up) from the front of *p. */
static inline float *tf_scratch_take(float **p, size_t floats)
{
	float *r = *p;
	*p += tf_scratch_round(floats);
	return r;
}

#endif /* TF_PLUGIN_SCRATCH_H */
