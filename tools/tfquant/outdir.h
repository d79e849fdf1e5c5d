/*
 * outdir.h - the non-tensor half of a converted checkpoint folder:
 * config.json with quantization_config, and the source's other files.
 */
#ifndef TFQ_OUTDIR_H
#define TFQ_OUTDIR_H

#include "codebook.h"

typedef struct tfq_meta {
	double bits;            /* average K over the budgeted layers */
	int head_bits, mtp_bits;
	tf_exl3_cb cb;
} tfq_meta;

/* dst/config.json = src/config.json + "quantization_config" (exllamav3's
 * keys: quant_method, version, bits, head_bits, mtp_bits, codebook,
 * out_scales, calibration). */
int tfq_outdir_config(const char *src, const char *dst, const tfq_meta *m);

/* Copy every regular file of src except config.json and the safetensors
 * (tokenizer, generation config, ...). */
int tfq_outdir_copy_files(const char *src, const char *dst);

#endif /* TFQ_OUTDIR_H */
