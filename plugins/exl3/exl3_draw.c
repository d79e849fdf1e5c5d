/*
 * exl3_draw.c - the draw slot of the exl3 descriptors: the tensors
 * exl3_quantize.c would store, with random codes.  Any bitstream is a valid
 * tail-biting trellis (spec exl3.md §4.3), so random `trellis` bits make
 * every codebook state equally likely and Ŵ's RMS the codebook's RMS over
 * its 65536 states; `suh` = random signs x rms / that RMS and `svh` =
 * random signs (0 on the padding) then give the decoded
 * diag(suh)·H·Ŵ·H·diag(svh) the RMS asked for, as the Hadamards are
 * orthonormal.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "codebook.h"
#include "lin.h"

#define PAD128(x) (((x) + 127) / 128 * 128)

static double cb_rms[TF_EXL3_CB_COUNT];
static pthread_once_t cb_rms_once = PTHREAD_ONCE_INIT;

static void cb_rms_init(void)
{
	for (int cb = 0; cb < TF_EXL3_CB_COUNT; cb++) {
		double sum = 0;
		for (uint32_t s = 0; s < 65536; s++) {
			double w = tf_exl3_cb_f32((uint16_t)s, (tf_exl3_cb)cb);
			sum += w * w;
		}
		cb_rms[cb] = sqrt(sum / 65536);
	}
}

static int draw_add(const tf_draw_sink *sink, const char *prefix, const char *leaf,
		    tf_dtype dt, int ndim, const int64_t *shape, tf_draw_fill fill, double a,
		    double b)
{
	char name[1024];
	snprintf(name, sizeof(name), "%s.%s", prefix, leaf);
	return sink->add(sink->ctx, name, dt, ndim, shape, fill, a, b);
}

int tf_exl3_draw_slot(const tf_host *h, const char *prefix, int64_t out, int64_t in,
		      double rms, const tf_quantize_opts *o, const tf_draw_sink *sink)
{
	static const int32_t marker[TF_EXL3_CB_COUNT] = {
		[TF_EXL3_CB_MCG] = TF_EXL3_MCG_MARKER, [TF_EXL3_CB_MUL1] = TF_EXL3_MUL1_MARKER,
	};
	int K = o->bits ? o->bits : 4, cb = TF_EXL3_CB_MUL1;

	if (K < 1 || K > 8)
		return h->error(h, TF_ERR_UNSUPPORTED, "%s: EXL3 stores 1..8 bits per weight, "
				"not %d", prefix, K);
	if (o->variant) {
		for (cb = 0; cb < TF_EXL3_CB_COUNT; cb++)
			if (!strcmp(o->variant, tf_exl3_cb_name((tf_exl3_cb)cb)))
				break;
		if (cb == TF_EXL3_CB_COUNT)
			return h->error(h, TF_ERR_UNSUPPORTED, "%s: EXL3 has no codebook '%s' "
					"(mul1, mcg, 3inst)", prefix, o->variant);
	}
	if (strlen(prefix) > 1000)
		return h->error(h, TF_ERR_RANGE, "%s: prefix too long", prefix);
	pthread_once(&cb_rms_once, cb_rms_init);

	int64_t k = PAD128(in), n = PAD128(out);
	int64_t ts[3] = { k / 16, n / 16, 16 * K };
	int rc;
	if ((rc = draw_add(sink, prefix, "trellis", TF_DTYPE_I16, 3, ts, TF_DRAW_BITS, 0, 0)) ||
	    (rc = draw_add(sink, prefix, "suh", TF_DTYPE_F16, 1, &k, TF_DRAW_SIGNS,
			   rms / cb_rms[cb], (double)in)) ||
	    (rc = draw_add(sink, prefix, "svh", TF_DTYPE_F16, 1, &n, TF_DRAW_SIGNS, 1.0,
			   (double)out)))
		return rc;
	if (cb == TF_EXL3_CB_3INST)     /* the original codebook has no marker */
		return TF_OK;
	return draw_add(sink, prefix, tf_exl3_cb_name((tf_exl3_cb)cb), TF_DTYPE_I32, 0, NULL,
			TF_DRAW_CONST, marker[cb], 0);
}
