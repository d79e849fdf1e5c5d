/*
 * outdir.h - the non-tensor half of a converted checkpoint folder:
 * config.json with quantization_config, and the source's other files.
 */
#ifndef TFQ_OUTDIR_H
#define TFQ_OUTDIR_H

typedef struct tfq_meta {
	const char *format;     /* the quant plugin: "exl3", "example-int8" */
	const char *variant;    /* its variant ("mul1"); NULL: the default */
	double bits;            /* average K over the budgeted layers */
	int head_bits, mtp_bits;
} tfq_meta;

/* dst/config.json = src/config.json + "quantization_config": quant_method
 * (the format), version and bits; for exl3 also exllamav3's head_bits,
 * mtp_bits, codebook, out_scales and calibration.  The float-typed keys
 * come out as JSON floats (tfq_config_floats). */
int tfq_outdir_config(const char *src, const char *dst, const tfq_meta *m);

struct cJSON;
/* Turn the config keys that transformers' BailingHybridConfig types float
 * (kda_lower_bound, rope_theta, ...) into JSON floats when they hold whole
 * numbers, which cJSON would print as ints (-5, not -5.0): its strict
 * dataclass refuses an int there.  TF_OK or TF_ERR_NOMEM. */
int tfq_config_floats(struct cJSON *config);

/* Copy every regular file of src except config.json and the safetensors
 * (tokenizer, generation config, ...). */
int tfq_outdir_copy_files(const char *src, const char *dst);

#endif /* TFQ_OUTDIR_H */
