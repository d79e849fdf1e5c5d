/*
 * graph.c - a step of backend-cuda's stream recorded and run as CUDA
 * graphs (the backend's graph_begin and graph_end slots, ABI 1.10).
 *
 * The engine brackets a decode step with them; the ops, the copies and
 * the device plugins' launches in between are captured from the stream
 * (cudaStreamCaptureModeRelaxed: a cache page or an arena may still be
 * allocated part way) instead of run.  Every step is captured afresh, so
 * what varies from step to step (the token, the positions, the cache
 * length and pages, the absorbed split) reaches the graph as the
 * parameters the plugins' host code gives its launches, unchanged.
 *
 * A step that waits for the device part way (tensor parallelism's
 * all-reduce through the host) comes in parts, each ended before the
 * wait with TF_GRAPH_PART and the last with TF_GRAPH_RUN, so a part's
 * ordinal in its step is its place.  Each place keeps a few executable
 * graphs, one per kind of step that has a part there (a decode step's,
 * an MTP draft's, a verify's: the same place holds different nodes);
 * a part whose nodes match one of them gives it its parameters
 * (cudaGraphExecUpdate) and launches it, else a new one is built in
 * place of the least recently used.  A place is only where to look
 * first: any graph whose nodes match is the recorded part.
 *
 * Host sources of copies must outlive the capture and be pinned: uploads
 * and embeds copy them into `pin`, which is rewritten only after the
 * graphs that read it have run: graph_begin drains the stream first (a
 * part follows a host wait, so the drain costs nothing then).  Nothing
 * recorded has run before graph_end, so a free in between is held until
 * the next drain, and download and sync are refused (backend.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

void cuda_graph_settle(tf_cuda *c)
{
	tf_cuda_graph *g = &c->graph;
	if (g->recording)
		return;
	for (int i = 0; i < g->n_held; i++) {
		if (g->held[i].pinned)
			cudaFreeHost(g->held[i].p);
		else
			cudaFree(g->held[i].p);
	}
	g->n_held = 0;
}

void cuda_release(tf_cuda *c, void *p, bool pinned)
{
	tf_cuda_graph *g = &c->graph;
	if (!p)
		return;
	if (g->recording && g->n_held == g->held_cap) {
		int cap = g->held_cap ? 2 * g->held_cap : 16;
		tf_cuda_held *h = realloc(g->held, (size_t)cap * sizeof(*h));
		if (h) {
			g->held = h;
			g->held_cap = cap;
		}
	}
	if (g->recording && g->n_held < g->held_cap) {
		g->held[g->n_held++] = (tf_cuda_held){ p, pinned };
		return;
	}
	if (g->recording)       /* out of host memory to remember it: leak, never race */
		return;
	if (pinned)
		cudaFreeHost(p);
	else
		cudaFree(p);
}

void *cuda_graph_stage(tf_cuda *c, const void *src, size_t bytes)
{
	tf_cuda_graph *g = &c->graph;
	const size_t need = (bytes + 255) & ~(size_t)255;
	if (g->pin_used + need > g->pin_cap) {
		/* The full buffer may hold this step's earlier sources: kept
		 * until the step has run, and a larger one from here on. */
		size_t cap = g->pin_cap ? 2 * g->pin_cap : 64 << 10;
		while (cap < need)
			cap *= 2;
		void *p = NULL;
		if (cudaMallocHost(&p, cap) != cudaSuccess) {
			cudaGetLastError();
			return NULL;
		}
		cuda_release(c, g->pin, true);
		g->pin = p;
		g->pin_cap = cap;
		g->pin_used = 0;
	}
	char *at = g->pin + g->pin_used;
	g->pin_used += need;
	if (src)
		memcpy(at, src, bytes);
	return at;
}

int cuda_graph_begin(void *ctx)
{
	tf_cuda *c = ctx;
	tf_cuda_graph *g = &c->graph;
	const tf_host *h = c->host;
	if (g->recording)
		return h->error(h, TF_ERR_INTERNAL, "backend-cuda: graph_begin while recording");
	cuda_enter(c);
	/* The graphs launched before have read their pinned sources once
	 * this returns (after a part's host wait it has nothing to wait for). */
	cudaError_t e = cudaStreamSynchronize(c->stream);
	if (e == cudaSuccess) {
		cuda_graph_settle(c);
		g->pin_used = 0;
		e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed);
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		return h->error(h, TF_ERR_DEVICE, "backend-cuda: graph_begin: %s",
				cudaGetErrorString(e));
	}
	g->recording = true;
	return TF_OK;
}

/* The recorded part into an executable graph of its place: the first
 * whose nodes match, updated and moved to the front, else a new one in
 * front (the least recently used destroyed when the place is full; the
 * stream was drained at graph_begin, so it is not running). */
static cudaError_t graph_take(tf_cuda_graph *g, cudaGraph_t graph, cudaGraphExec_t *exec,
			      int *reused)
{
	if (g->part >= g->n_place) {
		int n = g->part + 8;
		tf_cuda_place *pl = realloc(g->place, (size_t)n * sizeof(*pl));
		if (!pl)
			return cudaErrorMemoryAllocation;
		memset(pl + g->n_place, 0, (size_t)(n - g->n_place) * sizeof(*pl));
		g->place = pl;
		g->n_place = n;
	}
	cudaGraphExec_t *way = g->place[g->part].exec;
	int k = 0;
	for (; k < CUDA_GRAPH_WAYS && way[k]; k++) {
		cudaGraphExecUpdateResultInfo info;
		if (cudaGraphExecUpdate(way[k], graph, &info) == cudaSuccess)
			break;
		cudaGetLastError();     /* other nodes, left as they were: not an error */
	}
	*reused = k < CUDA_GRAPH_WAYS && way[k];
	if (*reused) {
		*exec = way[k];
	} else {
		cudaError_t e = cudaGraphInstantiate(exec, graph, 0);
		if (e != cudaSuccess)
			return e;
		if (k == CUDA_GRAPH_WAYS)
			cudaGraphExecDestroy(way[--k]);
	}
	memmove(way + 1, way, (size_t)k * sizeof(*way));
	way[0] = *exec;
	return cudaSuccess;
}

int cuda_graph_end(void *ctx, int run, int *reused)
{
	tf_cuda *c = ctx;
	tf_cuda_graph *g = &c->graph;
	const tf_host *h = c->host;
	cudaGraph_t graph = NULL;

	*reused = 0;
	if (!g->recording)
		return h->error(h, TF_ERR_INTERNAL, "backend-cuda: graph_end without graph_begin");
	cuda_enter(c);
	cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
	g->recording = false;
	if (e == cudaSuccess && run && !c->status) {
		cudaGraphExec_t exec;
		e = graph_take(g, graph, &exec, reused);
		if (e == cudaSuccess)
			e = cudaGraphLaunch(exec, c->stream);
	}
	/* The next part's place: after this one while the step goes on. */
	g->part = run == TF_GRAPH_PART && e == cudaSuccess && !c->status ? g->part + 1 : 0;
	if (graph)
		cudaGraphDestroy(graph);
	if (e != cudaSuccess) {
		cudaGetLastError();
		cuda_fail(c, TF_ERR_DEVICE, "graph", cudaGetErrorString(e));
	}
	if (!run || !c->status)
		return TF_OK;
	int status = c->status;         /* the step's first failure, as sync returns it */
	c->status = TF_OK;
	return status;
}

void cuda_graph_fini(tf_cuda *c)
{
	tf_cuda_graph *g = &c->graph;
	for (int i = 0; i < g->n_place; i++)
		for (int k = 0; k < CUDA_GRAPH_WAYS && g->place[i].exec[k]; k++)
			cudaGraphExecDestroy(g->place[i].exec[k]);
	free(g->place);
	cuda_graph_settle(c);
	cudaFreeHost(g->pin);
	free(g->held);
}
