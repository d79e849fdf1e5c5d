/* fp16.cpp - the harness's fp16 conversions (cuda_fp16.h). */
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cuda_fp16.h"

namespace tf_simt {

/* Round to nearest even, through subnormals, to ±inf past 65520. */
unsigned short f64_to_f16(double f)
{
	const unsigned short sign = std::signbit(f) ? 0x8000 : 0;
	const double a = std::fabs(f);
	if (std::isnan(f))
		return sign | 0x7E00;
	if (a >= 65520.0)
		return sign | 0x7C00;
	if (a < 0x1p-14)        /* subnormal: multiples of 2^-24; 1024 is the least normal */
		return sign | (unsigned short)std::nearbyint(a * 0x1p24);
	int e;
	double m = std::frexp(a, &e);   /* a = m·2^e, m in [0.5, 1) */
	unsigned q = (unsigned)std::nearbyint(m * 2048.0);
	if (q == 2048) {
		q = 1024;
		e++;
	}
	return sign | (unsigned short)((e - 1 + 15) << 10 | (q - 1024));
}

float f16_to_f32(unsigned short h)
{
	const int e = h >> 10 & 31, m = h & 1023;
	float v;
	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = std::ldexp((float)m, -24);
	else
		v = std::ldexp((float)(1024 + m), e - 25);
	return h & 0x8000 ? -v : v;
}

} /* namespace tf_simt */
