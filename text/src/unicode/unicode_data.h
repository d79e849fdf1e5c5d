/*
 * unicode_data.h - the generated Unicode tables behind NFC (unicode_data.c).
 *
 * Every table is sorted by code point so lookups are binary searches.
 * Hangul syllables are absent: they decompose and compose arithmetically.
 */
#ifndef TF_UNICODE_DATA_H
#define TF_UNICODE_DATA_H

#include <stdint.h>

typedef struct tf_ucd_range { uint32_t lo, hi; } tf_ucd_range;
typedef struct tf_ucd_class { uint32_t lo, hi; uint8_t ccc; } tf_ucd_class;
/* Full canonical decomposition of cp: tf_ucd_decomp_cps[off .. off+len). */
typedef struct tf_ucd_decomp { uint32_t cp; uint16_t off, len; } tf_ucd_decomp;
/* Primary composite: first + second -> composite. */
typedef struct tf_ucd_pair { uint32_t first, second, composite; } tf_ucd_pair;

extern const char tf_ucd_version[];
/* Runs of code points with a non-zero canonical combining class. */
extern const tf_ucd_class tf_ucd_ccc[];
extern const unsigned tf_ucd_ccc_len;
/* Code points that NFC may change: they decompose, combine, or compose with
 * what precedes them.  Text without any is already NFC. */
extern const tf_ucd_range tf_ucd_nfc_unsafe[];
extern const unsigned tf_ucd_nfc_unsafe_len;
extern const tf_ucd_decomp tf_ucd_decomps[];
extern const unsigned tf_ucd_decomps_len;
extern const uint32_t tf_ucd_decomp_cps[];
extern const tf_ucd_pair tf_ucd_comps[];
extern const unsigned tf_ucd_comps_len;

#endif /* TF_UNICODE_DATA_H */
