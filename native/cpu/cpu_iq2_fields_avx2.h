/* IQ2_XXS per-group sign and scale fields, eight groups at once (AVX2), shared by the
 * row kernel (cpu_dot_avx2.c) and the group tile (cpu_tile_iq2.c) so both read a block
 * the same way (docs/reference/formats.md, IQ2_XXS).
 *
 * Input: s = the eight groups' sign/scale words s_g (the odd u32 of a block's qs), in
 * group order. Output: *signs = per group, its four 7-bit sign fields as bytes, each with
 * its parity as bit 7 (the eighth sign, as ds4_iq2_ksigns stores it); *scales = per
 * group, two int16 copies of the group scale 2 * (s_g >> 28) + 1. */
#ifndef DS4_CPU_IQ2_FIELDS_AVX2_H
#define DS4_CPU_IQ2_FIELDS_AVX2_H

#include <immintrin.h>

__attribute__((target("avx2"))) static inline void ds4_iq2_fields_avx2(__m256i s, __m256i *signs,
                                                                       __m256i *scales) {
    const __m256i m7 = _mm256_set1_epi32(0x7f);
    __m256i t = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(s, m7),
                        _mm256_and_si256(_mm256_slli_epi32(s, 1), _mm256_slli_epi32(m7, 8))),
        _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(s, 2), _mm256_slli_epi32(m7, 16)),
                        _mm256_and_si256(_mm256_slli_epi32(s, 3), _mm256_slli_epi32(m7, 24))));
    /* parity of each 7-bit field: fold the nibbles, then a 16-entry table (0 or 0x80) */
    const __m256i par4 = _mm256_setr_epi8(
        0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0,
        0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    __m256i nib = _mm256_and_si256(_mm256_xor_si256(t, _mm256_srli_epi16(t, 4)),
                                   _mm256_set1_epi8(15));
    *signs = _mm256_or_si256(t, _mm256_shuffle_epi8(par4, nib));
    __m256i l = _mm256_or_si256(_mm256_srli_epi32(s, 27), _mm256_set1_epi32(1));
    *scales = _mm256_or_si256(l, _mm256_slli_epi32(l, 16));
}

#endif
