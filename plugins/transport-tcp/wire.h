/*
 * wire.h - little-endian integers in the transports' messages.
 */
#ifndef TF_TCP_WIRE_H
#define TF_TCP_WIRE_H

#include <stdint.h>

static inline uint8_t *tf_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	return p + 2;
}

static inline uint8_t *tf_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 4;
}

static inline uint8_t *tf_put64(uint8_t *p, uint64_t v)
{
	return tf_put32(tf_put32(p, (uint32_t)v), (uint32_t)(v >> 32));
}

static inline uint16_t tf_get16(const uint8_t **p)
{
	uint16_t v = (uint16_t)((*p)[0] | (*p)[1] << 8);
	*p += 2;
	return v;
}

static inline uint32_t tf_get32(const uint8_t **p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)(*p)[i] << (8 * i);
	*p += 4;
	return v;
}

static inline uint64_t tf_get64(const uint8_t **p)
{
	uint64_t lo = tf_get32(p);
	return lo | (uint64_t)tf_get32(p) << 32;
}

#endif /* TF_TCP_WIRE_H */
