/*
 * cuda_backend.h - what backend.c (memory, copies, ops) and graph.c (a
 * step recorded and run as CUDA graphs) share: the instance and its
 * error helpers; unified.c (host memory the device reads in place).
 * Private to backend-cuda.
 */
#ifndef TF_CUDA_BACKEND_H
#define TF_CUDA_BACKEND_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tf/backend.h"

/* Memory freed while a step is recorded: released once the step has run. */
typedef struct tf_cuda_held {
	void *p;
	bool pinned;
} tf_cuda_held;

/* The executable graphs kept for one place in a step (the ordinal of a
 * part: graph_end's TF_GRAPH_PART), one per kind of step with a part
 * there (a decode step, an MTP draft, a verify, a batch of another
 * size), the most recently used first; NULL past the last. */
#define CUDA_GRAPH_WAYS 4
typedef struct tf_cuda_place {
	cudaGraphExec_t exec[CUDA_GRAPH_WAYS];
} tf_cuda_place;

/* graph_begin .. graph_end. */
typedef struct tf_cuda_graph {
	bool recording;
	tf_cuda_place *place;           /* [n_place]: by a part's place in its step */
	int n_place;
	int part;                       /* the place of the part recorded next */
	char *pin;                      /* pinned copies of the recorded part's host sources */
	size_t pin_cap, pin_used;
	tf_cuda_held *held;
	int n_held, held_cap;
} tf_cuda_graph;

/* A page range of host memory registered for the device, and how many
 * maps use it. */
typedef struct tf_cuda_pin {
	char *lo, *hi;
	int refs;
} tf_cuda_pin;

/* How weights reach the device ([runtime] unified_memory). */
typedef enum tf_cuda_um_mode {
	TF_CUDA_UM_COPY,                /* map declines: plugins copy to device memory */
	TF_CUDA_UM_REGISTER,            /* map registers the pages (cudaHostRegister) */
	TF_CUDA_UM_PAGEABLE,            /* the device reads pageable memory as it is */
} tf_cuda_um_mode;

typedef struct tf_cuda_unified {
	tf_cuda_um_mode mode;
	tf_cuda_pin *pins;              /* sorted, disjoint */
	int n_pins, cap;
	uint64_t mapped, mapped_peak;   /* bytes mapped now, and at most */
	uint64_t mapped_total;          /* by every map so far */
} tf_cuda_unified;

typedef struct tf_cuda {
	const tf_host *host;
	int device;
	cudaStream_t stream;
	int status;                     /* first op failure since the last sync */

	/* Scratch for embed and convert, grown on demand. */
	void *ids_dev;                  /* token ids copied to the device */
	size_t ids_cap;
	void *rows_dev;                 /* rows gathered from a host table, or a
					 * host source of convert */
	size_t rows_cap;
	void *staging;                  /* pinned host copy of those rows */
	size_t staging_cap;
	void *rope_dev;                 /* rope's host positions and frequencies */
	size_t rope_cap;
	void *draw_dev;                 /* sample's (seq, pos), tokens and scratch */
	size_t draw_cap;

	tf_cuda_graph graph;
	tf_cuda_unified um;
} tf_cuda;

/* Keep (and log) the first failure of an op; it is returned by sync. */
void cuda_fail(tf_cuda *c, int status, const char *op, const char *why);

/* cuda_fail for a CUDA error; nonzero when there was one. */
int cuda_check(tf_cuda *c, cudaError_t e, const char *op);

/* Calls may come from any host thread: point it at our device first. */
void cuda_enter(tf_cuda *c);

/* graph.c: the backend's graph_begin and graph_end slots. */
int cuda_graph_begin(void *ctx);
int cuda_graph_end(void *ctx, int run, int *reused);

/* Free device (or pinned host) memory now, or, while a step is recorded,
 * once it has run. */
void cuda_release(tf_cuda *c, void *p, bool pinned);

/* While recording: `bytes` of pinned memory the step's graph may read,
 * holding a copy of src (unless NULL), valid until the step has run; NULL
 * when out of pinned memory. */
void *cuda_graph_stage(tf_cuda *c, const void *src, size_t bytes);

/* After the stream has drained (not while recording): release what the
 * last step held. */
void cuda_graph_settle(tf_cuda *c);

/* At fini, the stream drained: the executable graphs and the pinned memory. */
void cuda_graph_fini(tf_cuda *c);

/* unified.c: [runtime] unified_memory read and decided at init (an error
 * naming the key when `on` cannot be had), the map and unmap slots, and
 * at fini (the stream drained) what is still registered. */
int cuda_unified_init(tf_cuda *c);
int cuda_unified_map(void *ctx, const void *host, size_t bytes, const void **dev);
void cuda_unified_unmap(void *ctx, const void *host, size_t bytes);
void cuda_unified_fini(tf_cuda *c);

/* False when [p, p + bytes) starts in host pages registered by map but
 * runs past them (a table beside a mapped weight): the device may not
 * read it all there.  True otherwise, the runtime's pointer attributes
 * then saying what the device reads. */
bool cuda_unified_covers(const tf_cuda *c, const void *p, size_t bytes);

#endif /* TF_CUDA_BACKEND_H */
