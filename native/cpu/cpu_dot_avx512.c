/* AVX-512 (F/BW/VL/DQ + VBMI + VNNI) dot products for the int8 paths where they pay:
 * Q2_K (routed down projections) and the Q8_0 prefill tile. The other row kernels are
 * the AVX2 ones (the table is assembled in cpu_matmul.c). Integer block sums are exact and equal to
 * the scalar kernels'; only the f32 accumulation order differs (16 lanes, fused
 * multiply-adds). The caller routes activations holding a -128 code to the scalar
 * kernels, so negating an activation code below never overflows. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_internal.h"

#define AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,avx2,fma,f16c")))

AVX512 static inline float hsum512(__m512 v) {
    __m256 s = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* Q2_K times table: dword s holds the bytes 0, s, 2s, 3s for a 4-bit scale s, so one
 * dword permute by the 16 scales gives the block's table (byte 4k + i = i * scale_k) and
 * one byte permute turns codes into scale * code (at most 45: a u8 operand of the int8
 * dot instruction); the per-16 scale multiply leaves the inner loop. */
static const uint32_t q2k_times[16] __attribute__((aligned(64))) = {
#define T(s) (uint32_t)((s) << 8 | (2 * (s)) << 16 | (3 * (s)) << 24)
    T(0), T(1), T(2),  T(3),  T(4),  T(5),  T(6),  T(7),
    T(8), T(9), T(10), T(11), T(12), T(13), T(14), T(15),
#undef T
};

/* Byte b of step m's table index base: 4 * sub-block (4m + b/16), the sub-block of the
 * 16 values in 128-bit lane b/16 when the zmm holds values 64m .. 64m + 63. */
#define LANE(k) 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), \
                4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k), 4 * (k)
#define STEP(m) {LANE(4 * (m)), LANE(4 * (m) + 1), LANE(4 * (m) + 2), LANE(4 * (m) + 3)}
static const uint8_t q2k_base[4][64] __attribute__((aligned(64))) = {
    STEP(0), STEP(1), STEP(2), STEP(3),
};
#undef STEP
#undef LANE

AVX512 static float dot_q2_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const __m512i times = _mm512_load_si512((const void *)q2k_times);
    const __m512i mask3 = _mm512_set1_epi8(3);
    /* low 256 bits take code pair j, the high 256 bits pair j + 1 of the same bytes */
    const __m512i shift_lo = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
    const __m512i shift_hi = _mm512_set_epi64(6, 6, 6, 6, 4, 4, 4, 4);
    __m512 acc = _mm512_setzero_ps();
    __m256 macc = _mm256_setzero_ps();
    for (size_t b = 0; b < cols / 256; b++, w += 84) {
        const int8_t *q8 = y[b].q;
        __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)w);
        /* this block's scale * code table: byte 4k + i = i * (sc[k] & 15) */
        /* vpermd reads the low 4 bits of each index: the scale nibble, no masking */
        __m512i table = _mm512_permutexvar_epi32(_mm512_cvtepu8_epi32(sc), times);
        __m256i mins = _mm256_srli_epi16(_mm256_cvtepu8_epi16(sc), 4);
        __m256i summs = _mm256_madd_epi16(
            mins, _mm256_loadu_si256((const __m256i *)(const void *)y[b].bsums));
        __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            __m512i bits = _mm512_broadcast_i64x4(
                _mm256_loadu_si256((const __m256i *)(const void *)(w + 16 + 32 * (m >> 1))));
            bits = _mm512_srlv_epi64(bits, (m & 1) ? shift_hi : shift_lo);
            const __m512i base = _mm512_load_si512((const void *)q2k_base[m]);
            /* (bits & 3) | base, then scale * code from the block's table */
            __m512i idx = _mm512_ternarylogic_epi64(bits, mask3, base, 0xea);
            __m512i wq = _mm512_permutexvar_epi8(idx, table);
            __m512i xq = _mm512_loadu_si512((const void *)(q8 + 64 * m));
            isum = _mm512_dpbusd_epi32(isum, wq, xq);
        }
        /* (d * f16 all, d * f16 min) in lanes 0 and 1: the scalar kernel's products */
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)rd_u32(w + 80))),
                               _mm_set1_ps(y[b].d));
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(isum), acc);
        macc = _mm256_fmadd_ps(_mm256_permutexvar_ps(_mm256_set1_epi32(1), _mm256_castps128_ps256(dd)),
                               _mm256_cvtepi32_ps(summs), macc);
    }
    __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(macc), _mm256_extractf128_ps(macc, 1));
    m4 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
    return hsum512(acc) - _mm_cvtss_f32(m4);
}

AVX512 static inline __m512i load_2x32(const void *lo, const void *hi) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
        _mm256_loadu_si256((const __m256i *)hi), 1);
}

/* [a x 8 | b x 8] */
AVX512 static inline __m512 pair_ps(float a, float b) {
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

/* Q8_0 prefill tile: Q8_0_TILE_ROWS weight rows x Q8_0_TILE_TOKS tokens per pass over
 * the blocks, so every weight and activation load and scale conversion serves several
 * products. Each product is computed with exactly the AVX2 row kernel's arithmetic
 * (cpu_dot_avx2.c dot_q8_0): the same exact int32 lane sums, the same f32 block scale
 * f16(w.d) * x.d, even blocks fused into one 8-lane chain and odd blocks into another
 * (here the low and high halves of one zmm), the same final reduction. So a token's
 * result does not depend on whether it went through the tile or the row kernel.
 * Lane sums use x + 128 as the unsigned operand and start from -128 * sum(w), so no
 * sign juggling per product (and -128 codes would be fine too). */
AVX512 static inline float hsum_pair(__m512 v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX512 static void tile_q8_0(const uint8_t *w, size_t row_stride, const void *const *acts,
                             size_t cols, float *y, size_t y_stride) {
    enum { TR = Q8_0_TILE_ROWS, TT = Q8_0_TILE_TOKS };
    const ds4_block_q8a *x[TT];
    for (int t = 0; t < TT; t++) x[t] = acts[t];
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[TR][TT];
    for (int r = 0; r < TR; r++)
        for (int t = 0; t < TT; t++) acc[r][t] = _mm512_setzero_ps();
    size_t nb = cols / 32, b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i xq[TT];
        __m512 xd[TT];
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) {
            xq[t] = _mm512_xor_si512(load_2x32(x[t][b].q, x[t][b + 1].q), flip);
            xd[t] = pair_ps(x[t][b].d, x[t][b + 1].d);
        }
#pragma GCC unroll 4
        for (int r = 0; r < TR; r++) {
            const uint8_t *wb = w + r * row_stride + 34 * b;
            __m512i wq = load_2x32(wb + 2, wb + 36);
            __m512i corr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, flip, wq));
            __m512 wd = pair_ps(_cvtsh_ss(rd_u16(wb)), _cvtsh_ss(rd_u16(wb + 34)));
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++) {
                __m512i s = _mm512_dpbusd_epi32(corr, xq[t], wq);
                acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd, xd[t]), _mm512_cvtepi32_ps(s),
                                            acc[r][t]);
            }
        }
    }
    if (b < nb) {  /* the last, even-chain block: low halves only */
        __m512i xq[TT];
        __m512 xd[TT];
        for (int t = 0; t < TT; t++) {
            xq[t] = _mm512_xor_si512(
                _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)x[t][b].q)),
                flip);
            xd[t] = _mm512_set1_ps(x[t][b].d);
        }
        for (int r = 0; r < TR; r++) {
            const uint8_t *wb = w + r * row_stride + 34 * b;
            __m512i wq = _mm512_zextsi256_si512(
                _mm256_loadu_si256((const __m256i *)(const void *)(wb + 2)));
            __m512i corr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, flip, wq));
            __m512 wd = _mm512_set1_ps(_cvtsh_ss(rd_u16(wb)));
            for (int t = 0; t < TT; t++) {
                __m512i s = _mm512_dpbusd_epi32(corr, xq[t], wq);
                acc[r][t] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(wd, xd[t]),
                                                  _mm512_cvtepi32_ps(s), acc[r][t], 0x00ff);
            }
        }
    }
    for (int t = 0; t < TT; t++)
        for (int r = 0; r < TR; r++) y[t * y_stride + r] = hsum_pair(acc[r][t]);
}

ds4_dot_fn ds4_dot_avx512_q2_k(void) { return dot_q2_k; }
ds4_tile_fn ds4_tile_avx512_q8_0(void) { return tile_q8_0; }

#endif
