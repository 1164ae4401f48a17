/* AVX2 IQ4_NL and IQ4_XS dots (x86-64 only, chosen at run time; AVX-512 uses them
 * too). The 4-bit codes are looked up in the level table with one byte shuffle per 16
 * values; integer sums are exact and equal the scalar kernels'. IQ4_XS accumulates its
 * blocks in scalar order, so its result is bit-identical to ds4_dot_scalar_iq4_xs;
 * IQ4_NL accumulates 8 lanes with fused multiply-adds like MXFP4 (only the f32 order
 * differs). Codes of -128 are routed to the scalar kernels by the caller. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_internal.h"
#include "ds4_iq4_values.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline int hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The 32 signed levels of one 16-byte code run, in value order (low nibbles, then high). */
AVX2 static inline __m256i iq4_levels(const uint8_t *qs) {
    const __m128i kv = _mm_load_si128((const __m128i *)(const void *)DS4_IQ4_KVALUES);
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i q = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m128i lo = _mm_shuffle_epi8(kv, _mm_and_si128(q, m4));
    __m128i hi = _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    return _mm256_set_m128i(hi, lo);
}

/* int16 pair sums of w*x for 32 signed bytes (|w| <= 127, x never -128): exact. */
AVX2 static inline __m256i pairs_i8x32(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

AVX2 static inline __m256i load32(const int8_t *p) {
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

AVX2 float ds4_dot_avx2_iq4_nl(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    const __m256i one = _mm256_set1_epi16(1);
    size_t nb = cols / 32, b = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; b + 2 <= nb; b += 2, w += 36) {
        __m256i s0 = _mm256_madd_epi16(pairs_i8x32(iq4_levels(w + 2), load32(y[b].q)), one);
        __m256i s1 = _mm256_madd_epi16(pairs_i8x32(iq4_levels(w + 20), load32(y[b + 1].q)), one);
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(rd_u16(w)) * y[b].d),
                             _mm256_cvtepi32_ps(s0), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(rd_u16(w + 18)) * y[b + 1].d),
                             _mm256_cvtepi32_ps(s1), a1);
    }
    if (b < nb) {
        __m256i s0 = _mm256_madd_epi16(pairs_i8x32(iq4_levels(w + 2), load32(y[b].q)), one);
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(rd_u16(w)) * y[b].d),
                             _mm256_cvtepi32_ps(s0), a0);
    }
    return hsum8(_mm256_add_ps(a0, a1));
}

/* IQ4_XS: each run's int16 pair sums are multiplied by its signed scale in the madd
 * (|pair| <= 2*127*127 and |s - 32| <= 32: the int32 lanes stay exact). */
AVX2 float ds4_dot_avx2_iq4_xs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 136) {
        unsigned high = rd_u16(w + 2);
        __m256i isum = _mm256_setzero_si256();
        for (int i = 0; i < 8; i += 2) {
            int s0 = (int)((w[4 + i / 2] & 15) | (((high >> (2 * i)) & 3) << 4)) - 32;
            int s1 = (int)((w[4 + i / 2] >> 4) | (((high >> (2 * i + 2)) & 3) << 4)) - 32;
            __m256i p0 = pairs_i8x32(iq4_levels(w + 8 + 16 * i), load32(y[b].q + 32 * i));
            __m256i p1 = pairs_i8x32(iq4_levels(w + 24 + 16 * i), load32(y[b].q + 32 * i + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)s0)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)s1)));
        }
        acc += (_cvtsh_ss(rd_u16(w)) * y[b].d) * (float)hsum8_epi32(isum);
    }
    return acc;
}

#endif
