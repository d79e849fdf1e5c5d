/*
 * selftest.c - the latent cache's bf16 pages against float pages holding
 * the same rounded values, and the absorbed form's queries scanned together
 * against each alone, as a plain program so the vector code also runs for
 * aarch64 under qemu (scripts/cross-test.sh).  The float64 checks
 * live in tests/mla/.
 */
#include <stdlib.h>
#include <string.h>

#include "tf/dtype.h"

#include "../common/selftest.h"
#include "attend.h"

enum {
	ROWS = 310,             /* past one page, with a part-filled second */
	R = 20, DR = 4,         /* rows and their parts leave vector tails */
	LAT = R + DR,
	QN = 5,                 /* queries scanned together */
};

static uint64_t rng = 88172645463325252ull;

/* Rows of a cache laid out as attend.h says, in freshly allocated pages. */
static void cache_new(mla_cache *c, void **pages, const mla_dims *d, bool bf16)
{
	size_t bytes = (size_t)MLA_PAGE_ROWS * (d->r + d->dr) * (bf16 ? 2 : 4);
	for (int p = 0; p < 2; p++)
		pages[p] = malloc(bytes);
	*c = (mla_cache){ .page = pages, .bf16 = bf16 };
}

int main(void)
{
	const mla_dims d = { .heads = 2, .dn = 4, .dr = DR, .dv = 4, .r = R, .scale = 0.5f };
	const int lat = LAT;
	float *x = malloc(sizeof(float) * ROWS * lat), *xr = malloc(sizeof(float) * ROWS * lat);
	float *buf = malloc(sizeof(float) * MLA_TILE * lat), qlat[2 * LAT];
	float cb[2][MLA_KV_BLOCK * R], kpe[2][MLA_KV_BLOCK * DR];
	float acc[2][2 * R], *work = malloc(sizeof(float) * mla_absorbed_work(&d));
	mla_run run[2][2], many[QN * 2], alone[QN * 2];
	float qs[QN * 2 * LAT], acc_many[QN * 2 * R], acc_alone[QN * 2 * R];
	void *fp[2], *bp[2];
	mla_cache f, b;

	for (int i = 0; i < ROWS * lat; i++) {
		x[i] = 4 * tf_selftest_uniform(&rng);
		xr[i] = tf_bf16_to_f32(tf_f32_to_bf16(x[i]));
	}
	for (int i = 0; i < 2 * lat; i++)
		qlat[i] = tf_selftest_uniform(&rng);
	cache_new(&f, fp, &d, false);
	cache_new(&b, bp, &d, true);
	/* in two writes, the second across the page boundary */
	mla_cache_write(&d, &f, 0, 250, xr);
	mla_cache_write(&d, &f, 250, ROWS - 250, xr + 250 * lat);
	mla_cache_write(&d, &b, 0, 250, x);
	mla_cache_write(&d, &b, 250, ROWS - 250, x + 250 * lat);

	/* rows read back: float pages as written, bf16 pages rounded once */
	const int64_t spans[][2] = { { 0, 32 }, { 7, 25 }, { 250, 6 }, { 256, 32 }, { 300, 10 } };
	for (size_t s = 0; s < sizeof(spans) / sizeof(spans[0]); s++) {
		int64_t t = spans[s][0], n = spans[s][1];
		const float *rf = mla_cache_rows(&d, &f, t, n, buf);
		tf_selftest_check(!memcmp(rf, xr + t * lat, sizeof(float) * n * lat),
				  "f32 rows %lld + %lld", (long long)t, (long long)n);
		const float *rb = mla_cache_rows(&d, &b, t, n, buf);
		tf_selftest_check(!memcmp(rb, xr + t * lat, sizeof(float) * n * lat),
				  "bf16 rows %lld + %lld", (long long)t, (long long)n);
	}

	/* the naive form's split of the second, part-filled page */
	mla_naive_split(&d, &f, 256, ROWS - 256, cb[0], kpe[0]);
	mla_naive_split(&d, &b, 256, ROWS - 256, cb[1], kpe[1]);
	tf_selftest_check(!memcmp(cb[0], cb[1], sizeof(float) * (ROWS - 256) * d.r) &&
			  !memcmp(kpe[0], kpe[1], sizeof(float) * (ROWS - 256) * d.dr),
			  "naive split of bf16 and f32 pages");
	tf_selftest_check(!memcmp(kpe[0], xr + 256 * lat + d.r, sizeof(float) * d.dr),
			  "naive split's first k_pe");

	/* the absorbed form over rows that cross the page boundary, from an
	 * unaligned start: the same floats in, the same bits out */
	mla_absorbed_rows(&d, qlat, 1, ROWS, &f, 201, ROWS, run[0], acc[0], 0, work);
	mla_absorbed_rows(&d, qlat, 1, ROWS, &b, 201, ROWS, run[1], acc[1], 0, work);
	tf_selftest_check(!memcmp(run[0], run[1], sizeof(run[0])) &&
			  !memcmp(acc[0], acc[1], sizeof(acc[0])),
			  "absorbed rows over bf16 and f32 pages");

	/* QN queries seeing 230 .. 230 + QN - 1 rows, scanned together over
	 * parts that cross the page boundary mid-tile and end past some of
	 * them: each query's bits are those it gets alone */
	for (int64_t t0 = 0; t0 < ROWS; t0 += 96) {
		const int64_t t1 = t0 + 96, seen = 230;
		for (int i = 0; i < QN * 2 * LAT; i++)
			qs[i] = tf_selftest_uniform(&rng);
		for (int i = 0; i < QN * 2; i++)
			many[i] = alone[i] = (mla_run){ .m = 123.0f, .l = -1.0f };
		for (int i = 0; i < QN * 2 * R; i++)
			acc_many[i] = acc_alone[i] = 7.0f;
		mla_absorbed_rows(&d, qs, QN, seen, &b, t0, t1, many, acc_many, 2, work);
		for (int i = 0; i < QN; i++)
			mla_absorbed_rows(&d, qs + i * 2 * LAT, 1, seen + i, &b, t0, t1, alone + 2 * i,
					  acc_alone + i * 2 * R, 0, work);
		tf_selftest_check(!memcmp(many, alone, sizeof(many)) &&
					  !memcmp(acc_many, acc_alone, sizeof(acc_many)),
				  "%d queries scanned together over rows [%lld, %lld)", QN,
				  (long long)t0, (long long)t1);
	}
	/* parts: whole tiles, at most MLA_PARTS, the fewest rows that allows */
	for (int64_t rows = 1; rows < 1 << 20; rows = rows * 3 + 1) {
		const int64_t part = mla_part_rows(rows), parts = (rows + part - 1) / part;
		tf_selftest_check(part % MLA_TILE == 0 && parts <= MLA_PARTS &&
					  (part == MLA_PART_MIN || (rows + part / 2 - 1) / (part / 2) > MLA_PARTS),
				  "%lld rows in parts of %lld", (long long)rows, (long long)part);
	}

	for (int p = 0; p < 2; p++) {
		free(fp[p]);
		free(bp[p]);
	}
	free(x);
	free(xr);
	free(buf);
	free(work);
	return tf_selftest_done();
}
