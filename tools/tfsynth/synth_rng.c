/*
 * synth_rng.c - deterministic tensor values from (seed, tensor name).
 *
 * Every value is a pure function of the seed, the tensor's name and the
 * element index (splitmix64 used as a counter hash), so the output does not
 * depend on the order tensors are written, on sharding or on threads, and a
 * tensor can be regenerated alone.
 */
#include <math.h>

#include "synth.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* FNV-1a of the name, mixed with the seed: one stream per tensor. */
static uint64_t tensor_key(uint64_t seed, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = (h ^ *c) * 0x100000001b3ull;
	return mix64(seed * GOLDEN ^ h);
}

/* Uniform in (0, 1]: the top 53 bits of the i-th draw, never 0 (for log). */
static double uniform(uint64_t key, uint64_t i)
{
	return ((mix64(key + (i + 1) * GOLDEN) >> 11) + 1) * 0x1p-53;
}

static void store(const tf_synth_tensor *t, void *out, size_t i, double v)
{
	if (t->dtype == TF_DTYPE_F32)
		((float *)out)[i] = (float)v;
	else if (t->dtype == TF_DTYPE_F16)
		((uint16_t *)out)[i] = tf_f32_to_f16((float)v);
	else
		((uint16_t *)out)[i] = tf_f32_to_bf16((float)v);
}

/* Four 16-bit words from each 64-bit draw. */
static void fill_bits(uint64_t key, uint16_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (uint16_t)(mix64(key + (i / 4 + 1) * GOLDEN) >> (16 * (i % 4)));
}

/* ±a for the first b elements (the logical channels), 0 on the padding. */
static void fill_signs(const tf_synth_tensor *t, uint64_t key, void *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double sign = mix64(key + (i + 1) * GOLDEN) >> 63 ? -1.0 : 1.0;
		store(t, out, i, (double)i < t->b ? sign * t->a : 0.0);
	}
}

void tf_synth_fill(const tf_synth_tensor *t, uint64_t seed, void *out)
{
	uint64_t key = tensor_key(seed, t->name);
	size_t n = tf_synth_tensor_bytes(t) / tf_dtype_size(t->dtype);

	switch (t->init) {
	case TF_SYNTH_BITS:
		fill_bits(key, out, n);
		return;
	case TF_SYNTH_SIGNS:
		fill_signs(t, key, out, n);
		return;
	case TF_SYNTH_CONST:
		for (size_t i = 0; i < n; i++)
			((int32_t *)out)[i] = (int32_t)t->a;
		return;
	case TF_SYNTH_LOG_UNIFORM:
		for (size_t i = 0; i < n; i++)
			store(t, out, i, log(t->a + (t->b - t->a) * uniform(key, i)));
		return;
	case TF_SYNTH_GAUSS:
		break;
	}
	/* Box-Muller: draws 2j and 2j+1 give the normals of elements 2j, 2j+1. */
	for (size_t i = 0; i < n; i += 2) {
		double r = sqrt(-2.0 * log(uniform(key, i)));
		double th = 2.0 * M_PI * uniform(key, i + 1);
		store(t, out, i, t->a + t->b * r * cos(th));
		if (i + 1 < n)
			store(t, out, i + 1, t->a + t->b * r * sin(th));
	}
}
