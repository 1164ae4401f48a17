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
#include "ds4_iq_grids.h"

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

/* ---- IQ2_XS, IQ3_XXS, IQ3_S . Q8_K (docs/reference/formats.md §5.12). Per 32-value run the
 * unsigned grid bytes go into maddubs against the activation codes carrying the values'
 * signs (sign_epi8 by 0x01 / 0xff byte masks), the int16 pair sums into madd with the
 * run's odd multiplier: exact int32 lanes, reduced per block and scaled in scalar order,
 * so the results are bit-identical to the scalar kernels. */

AVX2 static inline __m256i sign_masks(unsigned s0, unsigned s1, unsigned s2, unsigned s3) {
    return _mm256_set_epi64x((long long)ds4_iq2_sign_mask[s3], (long long)ds4_iq2_sign_mask[s2],
                             (long long)ds4_iq2_sign_mask[s1], (long long)ds4_iq2_sign_mask[s0]);
}

AVX2 static inline __m256i run_madd(__m256i grid, __m256i masks, const int8_t *q8, __m256i m) {
    __m256i x = _mm256_sign_epi8(load32(q8), masks);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(grid, x), m);
}

AVX2 float ds4_dot_avx2_iq2_xs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 74) {
        __m256i isum = _mm256_setzero_si256();
        for (int r = 0; r < 8; r++) {
            unsigned q0 = rd_u16(w + 2 + 8 * r), q1 = rd_u16(w + 4 + 8 * r);
            unsigned q2 = rd_u16(w + 6 + 8 * r), q3 = rd_u16(w + 8 + 8 * r);
            __m256i grid = _mm256_set_epi64x(
                (long long)DS4_IQ2XS_GRID[q3 & 511], (long long)DS4_IQ2XS_GRID[q2 & 511],
                (long long)DS4_IQ2XS_GRID[q1 & 511], (long long)DS4_IQ2XS_GRID[q0 & 511]);
            short m0 = (short)(2 * (w[66 + r] & 15) + 1), m1 = (short)(2 * (w[66 + r] >> 4) + 1);
            __m256i m = _mm256_set_m128i(_mm_set1_epi16(m1), _mm_set1_epi16(m0));
            __m256i masks = sign_masks(q0 >> 9, q1 >> 9, q2 >> 9, q3 >> 9);
            isum = _mm256_add_epi32(isum, run_madd(grid, masks, y[b].q + 32 * r, m));
        }
        acc += (_cvtsh_ss(rd_u16(w)) * y[b].d) * (float)hsum8_epi32(isum);
    }
    return 0.125f * acc;
}

AVX2 float ds4_dot_avx2_iq3_xxs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 98) {
        __m256i isum = _mm256_setzero_si256();
        for (int r = 0; r < 8; r++) {
            const uint8_t *g = w + 2 + 8 * r;
            uint32_t aux = rd_u32(w + 66 + 4 * r);
            __m256i grid = _mm256_set_epi32(
                (int)DS4_IQ3XXS_GRID[g[7]], (int)DS4_IQ3XXS_GRID[g[6]], (int)DS4_IQ3XXS_GRID[g[5]],
                (int)DS4_IQ3XXS_GRID[g[4]], (int)DS4_IQ3XXS_GRID[g[3]], (int)DS4_IQ3XXS_GRID[g[2]],
                (int)DS4_IQ3XXS_GRID[g[1]], (int)DS4_IQ3XXS_GRID[g[0]]);
            __m256i masks = sign_masks(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127,
                                       (aux >> 21) & 127);
            __m256i m = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
            isum = _mm256_add_epi32(isum, run_madd(grid, masks, y[b].q + 32 * r, m));
        }
        acc += (_cvtsh_ss(rd_u16(w)) * y[b].d) * (float)hsum8_epi32(isum);
    }
    return 0.25f * acc;
}

/* IQ3_S signs are plain bits: byte i of the run's mask is bit i % 8 of sign byte i / 8. */
AVX2 static inline __m256i bit_sign_masks(const uint8_t *signs) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)rd_u32(signs)), spread);
    __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

AVX2 float ds4_dot_avx2_iq3_s(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 110) {
        __m256i isum = _mm256_setzero_si256();
        for (int r = 0; r < 8; r++) {
            const uint8_t *lo = w + 2 + 8 * r;
            unsigned hi = w[66 + r];
            int e[8];
            for (int k = 0; k < 8; k++) e[k] = (int)DS4_IQ3S_GRID[lo[k] | (((hi >> k) & 1u) << 8)];
            __m256i grid = _mm256_setr_epi32(e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
            short m = (short)(2 * ((w[106 + r / 2] >> (4 * (r % 2))) & 15) + 1);
            __m256i masks = bit_sign_masks(w + 74 + 4 * r);
            isum = _mm256_add_epi32(isum,
                                    run_madd(grid, masks, y[b].q + 32 * r, _mm256_set1_epi16(m)));
        }
        acc += (_cvtsh_ss(rd_u16(w)) * y[b].d) * (float)hsum8_epi32(isum);
    }
    return acc;
}

#endif
