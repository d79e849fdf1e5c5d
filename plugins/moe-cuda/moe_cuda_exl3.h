/*
 * moe_cuda_exl3.h - a set of EXL3 MLPs in device memory for moe-cuda's
 * layers (moe_cuda_ffn.c): the routed experts, the shared expert or a
 * dense MLP, as tf_moe_cuda_exl3_mlp reads them.
 */
#ifndef TF_MOE_CUDA_EXL3_H
#define TF_MOE_CUDA_EXL3_H

#include <stdbool.h>
#include <stdint.h>

#include "moe_cuda.h"
#include "tf/plugin.h"
#include "tf_cuda_weight.h"

/* Whether the MLP `<prefix>` (or `<prefix>.0` when indexed) stores its
 * gate_proj as EXL3 (a `.trellis`). */
bool tf_moe_cuda_exl3_match(const tf_host *h, const char *prefix, bool indexed);

/* What a loaded set holds: one allocation, and with a backend that maps
 * host memory, each linear's trellis read in place (maps[i], empty when
 * copied).  tf_moe_cuda_exl3_free releases both. */
typedef struct tf_moe_cuda_exl3_mem {
	void *dev;
	tf_cuda_weight *maps;
	int n_maps;
} tf_moe_cuda_exl3_mem;

/*
 * The w->n_experts MLPs `<prefix>.<e>` (indexed) or `<prefix>` of w's
 * shape: each linear's tensors read and validated by plugins/exl3's own
 * code (exl3_load.c, as the exl3 and exl3-cuda linears), every one EXL3,
 * padded as TF_MOE_CUDA_EXL3_PAD of the whole MLP's `all` features and
 * without bias (else an error naming the tensor, `who` the layer); its
 * trellis as stored, suh and svh, and the descriptors w points at,
 * uploaded on the host's backend into one allocation mem->dev; the
 * trellis pages then released.  Where the backend maps host memory, a
 * trellis that is a view of the checkpoint is read in place instead
 * (mem->maps), its pages kept.
 *
 * Tensor parallel: w->inter is this rank's share [lo, lo + w->inter) of
 * the `all` features; a share short of all cuts each linear as exl3's
 * open_part does (tf_exl3_parts_cut: gate's and up's output blocks,
 * down's input blocks; a cut inside a Hadamard block fails naming the
 * trellis).  With rank_of (the routed experts' ranks) only the experts on
 * h->tp_rank are loaded, the others' descriptors zero (trellis NULL).
 */
int tf_moe_cuda_exl3_load(const tf_host *h, const char *who, const char *prefix, bool indexed,
			  int64_t lo, int64_t all, const int32_t *rank_of, tf_moe_cuda_exl3_w *w,
			  tf_moe_cuda_exl3_mem *mem);

/* Unmap and free what a load holds; mem is empty after. */
void tf_moe_cuda_exl3_free(const tf_host *h, tf_moe_cuda_exl3_mem *mem);

#endif /* TF_MOE_CUDA_EXL3_H */
