/* F16 prefill tile (AVX-512 set): Q8_0_TILE_ROWS rows x Q8_0_TILE_TOKS tokens per pass,
 * so each f16 -> f32 weight conversion and each activation load serves several products
 * (the HC, router, compressor and indexer projections of a prefill chunk).
 *
 * Each product repeats the AVX2 row kernel's arithmetic (cpu_dot_avx2.c HALF_DOT): its
 * two 8-lane chains (values 16j..16j+7 and 16j+8..16j+15) are the low and high halves of
 * one zmm here, the 8-value remainder goes to the first chain, then the same reduction
 * and the same scalar tail in order. So the tile's output is bit-identical to the row
 * kernel's and a token's result does not depend on its batch. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_internal.h"

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma,f16c")))

AVX512 static inline float hsum_chains(__m512 v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX512 static void tile_f16(const uint8_t *w, size_t row_stride, const void *const *acts,
                            size_t cols, float *y, size_t y_stride) {
    enum { TR = Q8_0_TILE_ROWS, TT = Q8_0_TILE_TOKS };
    const float *x[TT];
    for (int t = 0; t < TT; t++) x[t] = acts[t];
    __m512 acc[TR][TT];
    for (int r = 0; r < TR; r++)
        for (int t = 0; t < TT; t++) acc[r][t] = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        __m512 xv[TT], wv[TR];
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) xv[t] = _mm512_loadu_ps(x[t] + i);
#pragma GCC unroll 4
        for (int r = 0; r < TR; r++)
            wv[r] = _mm512_cvtph_ps(
                _mm256_loadu_si256((const __m256i *)(const void *)(w + r * row_stride + 2 * i)));
#pragma GCC unroll 4
        for (int r = 0; r < TR; r++)
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv[t], acc[r][t]);
    }
    if (i + 8 <= cols) {  /* the first chain only */
        for (int r = 0; r < TR; r++) {
            __m512 wv = _mm512_castps256_ps512(_mm256_cvtph_ps(
                _mm_loadu_si128((const __m128i *)(const void *)(w + r * row_stride + 2 * i))));
            for (int t = 0; t < TT; t++)
                acc[r][t] = _mm512_mask3_fmadd_ps(
                    wv, _mm512_castps256_ps512(_mm256_loadu_ps(x[t] + i)), acc[r][t], 0x00ff);
        }
        i += 8;
    }
    for (int t = 0; t < TT; t++)
        for (int r = 0; r < TR; r++) {
            const uint8_t *wr = w + r * row_stride;
            float s = hsum_chains(acc[r][t]);
            for (size_t k = i; k < cols; k++) s += f16_to_f32(rd_u16(wr + 2 * k)) * x[t][k];
            y[t * y_stride + r] = s;
        }
}

ds4_tile_fn ds4_tile_avx512_f16(void) { return tile_f16; }

#endif
