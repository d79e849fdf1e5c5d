/*
 * graph.c - a step of backend-cuda's stream recorded and run as one CUDA
 * graph (the backend's graph_begin and graph_end slots, ABI 1.10).
 *
 * The engine brackets a decode step with them; the ops, the copies and
 * the device plugins' launches in between are captured from the stream
 * (cudaStreamCaptureModeRelaxed: a cache page or an arena may still be
 * allocated part way) instead of run.  Every step is captured afresh, so
 * what varies from step to step (the token, the positions, the cache
 * length and pages, the absorbed split) reaches the graph as the
 * parameters the plugins' host code gives its launches, unchanged; the
 * executable graph is built once and, while later steps have the same
 * nodes, cudaGraphExecUpdate gives it their parameters and it is
 * launched again.  A step whose nodes differ (a cache page taken, a
 * state's first use, another shape) builds a new one.
 *
 * Host sources of copies must outlive the capture and be pinned: uploads
 * and embeds copy them into `pin`, which is rewritten only after the last
 * step's graph has run (graph_begin drains the stream first).  Nothing
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
	/* The last step's graph has read its pinned sources once this returns. */
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

/* The recorded step into the executable graph: the last one updated when
 * the nodes match, else a new one. */
static cudaError_t graph_take(tf_cuda_graph *g, cudaGraph_t graph, int *reused)
{
	*reused = 0;
	if (g->exec) {
		cudaGraphExecUpdateResultInfo info;
		if (cudaGraphExecUpdate(g->exec, graph, &info) == cudaSuccess) {
			*reused = 1;
			return cudaSuccess;
		}
		cudaGetLastError();     /* another shape: not an error */
		cudaGraphExecDestroy(g->exec);
		g->exec = NULL;
	}
	return cudaGraphInstantiate(&g->exec, graph, 0);
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
		e = graph_take(g, graph, reused);
		if (e == cudaSuccess)
			e = cudaGraphLaunch(g->exec, c->stream);
	}
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
	if (g->exec)
		cudaGraphExecDestroy(g->exec);
	cuda_graph_settle(c);
	cudaFreeHost(g->pin);
	free(g->held);
}
