/*
 * tf/dtype.h - element types and the scalar conversions every module needs.
 *
 * Header-only so that plugins (which link against nothing from the core) use
 * the same rounding as the core.  The fp16 and bf16 conversions are exact
 * IEEE round-to-nearest-even; fast vector paths live in the backends.
 */
#ifndef TF_DTYPE_H
#define TF_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_dtype {
	TF_DTYPE_INVALID = 0,
	TF_DTYPE_F32,
	TF_DTYPE_F16,
	TF_DTYPE_BF16,
	TF_DTYPE_F64,
	TF_DTYPE_I8,
	TF_DTYPE_U8,
	TF_DTYPE_I16,
	TF_DTYPE_U16,
	TF_DTYPE_I32,
	TF_DTYPE_U32,
	TF_DTYPE_I64,
	TF_DTYPE_U64,
	TF_DTYPE_BOOL,
	TF_DTYPE_COUNT
} tf_dtype;

/* Size in bytes of one element, 0 for TF_DTYPE_INVALID.  (Switches, not
 * designated array initialisers, so the header also compiles as C++/CUDA.) */
static inline size_t tf_dtype_size(tf_dtype t)
{
	switch (t) {
	case TF_DTYPE_F64: case TF_DTYPE_I64: case TF_DTYPE_U64:
		return 8;
	case TF_DTYPE_F32: case TF_DTYPE_I32: case TF_DTYPE_U32:
		return 4;
	case TF_DTYPE_F16: case TF_DTYPE_BF16: case TF_DTYPE_I16: case TF_DTYPE_U16:
		return 2;
	case TF_DTYPE_I8: case TF_DTYPE_U8: case TF_DTYPE_BOOL:
		return 1;
	default:
		return 0;
	}
}

/* safetensors spelling ("F32", "BF16", ...). */
static inline const char *tf_dtype_name(tf_dtype t)
{
	switch (t) {
	case TF_DTYPE_F32:  return "F32";
	case TF_DTYPE_F16:  return "F16";
	case TF_DTYPE_BF16: return "BF16";
	case TF_DTYPE_F64:  return "F64";
	case TF_DTYPE_I8:   return "I8";
	case TF_DTYPE_U8:   return "U8";
	case TF_DTYPE_I16:  return "I16";
	case TF_DTYPE_U16:  return "U16";
	case TF_DTYPE_I32:  return "I32";
	case TF_DTYPE_U32:  return "U32";
	case TF_DTYPE_I64:  return "I64";
	case TF_DTYPE_U64:  return "U64";
	case TF_DTYPE_BOOL: return "BOOL";
	default:            return "INVALID";
	}
}

static inline uint32_t tf_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float tf_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float tf_bf16_to_f32(uint16_t h) { return tf_bits_f32((uint32_t)h << 16); }

/* Round to nearest even; NaN stays NaN (quiet). */
static inline uint16_t tf_f32_to_bf16(float f)
{
	uint32_t u = tf_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float tf_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	if (exp == 0x1f)
		return tf_bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		/* subnormal or zero: value = man * 2^-24 */
		float v = (float)man * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	return tf_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* Round to nearest even, with overflow to infinity and gradual underflow. */
static inline uint16_t tf_f32_to_f16(float f)
{
	uint32_t u = tf_f32_bits(f);
	uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00);          /* NaN */
	if (a >= 0x477ff000u)
		return (uint16_t)(sign | 0x7c00);          /* rounds to inf */
	if (a < 0x38800000u) {                             /* below 2^-14: subnormal */
		if (a < 0x33000000u)
			return (uint16_t)sign;             /* below half the smallest subnormal */
		uint32_t man = (a & 0x7fffff) | 0x800000;
		int shift = 126 - (int)(a >> 23);          /* 14..24 */
		uint32_t half = 1u << (shift - 1), rem = man & ((1u << shift) - 1);
		uint32_t r = man >> shift;
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	uint32_t r = a + 0x0fffu + ((a >> 13) & 1) - 0x38000000u;
	return (uint16_t)(sign | (r >> 13));
}

#ifdef __cplusplus
}
#endif
#endif /* TF_DTYPE_H */
