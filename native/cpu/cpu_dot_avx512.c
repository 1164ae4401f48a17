/* AVX-512 (F/BW/VL/DQ + VBMI + VNNI + GFNI) dot products for the int8 paths where they
 * pay: Q2_K (routed down projections; a row kernel and a 4-row decode kernel), Q8_0
 * decode (4 rows at a time) and the Q8_0 prefill tile. The other row kernels are the
 * AVX2 ones (the table is assembled in cpu_matmul.c). Integer block sums are exact and equal to
 * the scalar kernels'; only the f32 accumulation order differs (16 lanes, fused
 * multiply-adds). The caller routes activations holding a -128 code to the scalar
 * kernels, so negating an activation code below never overflows. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_internal.h"

#define AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,gfni,avx2,fma,f16c")))

/* The AVX2 kernels' 8-lane reduction: (lo128 + hi128), then pairs, then lanes 0 + 1. */
AVX512 static inline float hsum256(__m256 s8) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX512 static inline float hsum512(__m512 v) {
    __m256 s = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* Q2_K times table: dword s holds the bytes 0, s, 2s, 3s for a 4-bit scale s. */
static const uint32_t q2k_times[16] __attribute__((aligned(64))) = {
#define T(s) (uint32_t)((s) << 8 | (2 * (s)) << 16 | (3 * (s)) << 24)
    T(0), T(1), T(2),  T(3),  T(4),  T(5),  T(6),  T(7),
    T(8), T(9), T(10), T(11), T(12), T(13), T(14), T(15),
#undef T
};

/* Step m (0..3) multiplies values 64m .. 64m + 63: the low 256 bits hold code pair
 * 2(m & 1) of the 32 code bytes of half m >> 1, the high 256 bits pair 2(m & 1) + 1, so
 * byte p of the step is value 64m + p, in sub-block 4m + p / 16, and the activation is
 * read in its own order. One GF(2) affine map per step moves the code to bits 0-1 and
 * sets bits 2-3 to m (the matrix is per qword, so each half takes its own pair), and a
 * byte shuffle through the block's table gives scale * code (at most 45: the unsigned
 * operand of the int8 dot). The table's 128-bit lane L holds, at byte 4m + c,
 * c * scale[4m + L]: one dword permute of q2k_times by the scale bytes. */
#define Q2K_PICK(j) ((uint64_t)(1u << (2 * (j))) << 56 | (uint64_t)(1u << (2 * (j) + 1)) << 48)
#define Q2K_AFFINE(j) Q2K_PICK(j), Q2K_PICK(j), Q2K_PICK(j), Q2K_PICK(j), \
                      Q2K_PICK(j + 1), Q2K_PICK(j + 1), Q2K_PICK(j + 1), Q2K_PICK(j + 1)
static const uint64_t q2k_affine[2][8] __attribute__((aligned(64))) = {
    {Q2K_AFFINE(0)}, {Q2K_AFFINE(2)},
};
#undef Q2K_AFFINE
#undef Q2K_PICK

/* Byte 0 of dword 4L + m is scale byte 4m + L (the permute reads its low 4 bits). */
#define Q2K_D(L, m) 4 * (m) + (L), 0, 0, 0
#define Q2K_LANE(L) Q2K_D(L, 0), Q2K_D(L, 1), Q2K_D(L, 2), Q2K_D(L, 3)
static const uint8_t q2k_scale_pick[64] __attribute__((aligned(64))) = {
    Q2K_LANE(0), Q2K_LANE(1), Q2K_LANE(2), Q2K_LANE(3),
};
#undef Q2K_LANE
#undef Q2K_D

/* Activation step m of a block: values 64m .. 64m + 63 */
#define Q2K_X(m) _mm512_loadu_si512((const void *)(q8 + 64 * (m)))
/* isum of one block of one row: 16 exact int32 lanes (their sum is the scalar kernel's
 * isum). x0..x3: the block's four activation steps. */
AVX512 static inline __attribute__((always_inline)) __m512i q2k_isum_x(
    const uint8_t *wb, __m512i x0, __m512i x1, __m512i x2, __m512i x3) {
    const __m512i aff0 = _mm512_load_si512((const void *)q2k_affine[0]);
    const __m512i aff1 = _mm512_load_si512((const void *)q2k_affine[1]);
    __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)wb);
    __m512i table = _mm512_permutexvar_epi32(
        _mm512_permutexvar_epi8(_mm512_load_si512((const void *)q2k_scale_pick),
                                _mm512_castsi128_si512(sc)),
        _mm512_load_si512((const void *)q2k_times));
    /* the 32 code bytes of half h in both 256-bit halves */
#define Q2K_BITS(h) \
    _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(wb + 16 + 32 * (h))))
    __m512i b0 = Q2K_BITS(0), b1 = Q2K_BITS(1);
#undef Q2K_BITS
    /* step m: index (code | 4m), scale * code, int8 dot with the activation step */
#define Q2K_STEP(s, bits, aff, m, x) \
    _mm512_dpbusd_epi32(s, _mm512_shuffle_epi8(table, _mm512_gf2p8affine_epi64_epi8(bits, aff, 4 * (m))), x)
    __m512i s = Q2K_STEP(_mm512_setzero_si512(), b0, aff0, 0, x0);
    s = Q2K_STEP(s, b0, aff1, 1, x1);
    s = Q2K_STEP(s, b1, aff0, 2, x2);
    s = Q2K_STEP(s, b1, aff1, 3, x3);
#undef Q2K_STEP
    return s;
}

AVX512 static inline __attribute__((always_inline)) __m512i q2k_isum(const uint8_t *wb,
                                                                     const int8_t *q8) {
    return q2k_isum_x(wb, Q2K_X(0), Q2K_X(1), Q2K_X(2), Q2K_X(3));
}

/* The row kernel. Per block: isum in 16 int32 lanes and the mins term sum(min_k *
 * bsum_k) in 8, both exact; each scaled once into the row's f32 lanes by a fused
 * multiply-add with d * dall or d * dmin (rounded once, as in scalar). The group kernel
 * below does the same arithmetic lane for lane, so the two give identical results. */
AVX512 static float dot_q2_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    __m512 acc = _mm512_setzero_ps();
    __m256 macc = _mm256_setzero_ps();
    for (size_t b = 0; b < cols / 256; b++, w += 84) {
        __m512i isum = q2k_isum(w, y[b].q);
        __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)w);
        __m256i summs = _mm256_madd_epi16(_mm256_srli_epi16(_mm256_cvtepu8_epi16(sc), 4),
                                          _mm256_loadu_si256((const __m256i *)(const void *)y[b].bsums));
        /* (d * f16 all, d * f16 min) in lanes 0 and 1 */
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)rd_u32(w + 80))),
                               _mm_set1_ps(y[b].d));
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(isum), acc);
        macc = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), _mm256_cvtepi32_ps(summs),
                               macc);
    }
    return hsum512(acc) - hsum256(macc);
}

/* Q2K_GROUP rows: the activation steps (in registers) and bsums are loaded once per
 * block for all rows, the (dall, dmin) halves of all rows converted and scaled together, and two rows'
 * mins terms share one 16-lane vector ([row r | row r + 1], lanes as the row kernel's). */
enum { Q2K_GROUP = 4 };

AVX512 static void q2k_group(const uint8_t *w, size_t row_stride, const ds4_block_q8k *y,
                             size_t nb, float *out) {
    enum { R = Q2K_GROUP };
    /* ddv lane 2r = d * dall, 2r + 1 = d * dmin of row r; pair_min[p] broadcasts the
     * dmin of rows 2p and 2p + 1 to [2p x 8 | 2p + 1 x 8] */
    const __m512i pair_min[2] = {
        _mm512_inserti64x4(_mm512_set1_epi32(1), _mm256_set1_epi32(3), 1),
        _mm512_inserti64x4(_mm512_set1_epi32(5), _mm256_set1_epi32(7), 1)};
    __m512 acc[R], macc[R / 2];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int p = 0; p < R / 2; p++) macc[p] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + 84 * b;
        const __m512i bsums = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)(const void *)y[b].bsums));
        __m128i h = _mm_setr_epi32((int)rd_u32(wb + 80), (int)rd_u32(wb + row_stride + 80),
                                   (int)rd_u32(wb + 2 * row_stride + 80),
                                   (int)rd_u32(wb + 3 * row_stride + 80));
        __m256 ddv = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(y[b].d));
        const int8_t *q8 = y[b].q;
        __m512i x0 = Q2K_X(0), x1 = Q2K_X(1), x2 = Q2K_X(2), x3 = Q2K_X(3);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512i isum = q2k_isum_x(wb + r * row_stride, x0, x1, x2, x3);
            __m512 dall =
                _mm512_permutexvar_ps(_mm512_set1_epi32(2 * r), _mm512_castps256_ps512(ddv));
            acc[r] = _mm512_fmadd_ps(dall, _mm512_cvtepi32_ps(isum), acc[r]);
        }
#pragma GCC unroll 2
        for (int p = 0; p < R / 2; p++) {
            const uint8_t *w0 = wb + 2 * p * row_stride;
            __m256i sc2 = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)w0)),
                _mm_loadu_si128((const __m128i *)(const void *)(w0 + row_stride)), 1);
            __m512i summs = _mm512_madd_epi16(_mm512_srli_epi16(_mm512_cvtepu8_epi16(sc2), 4), bsums);
            __m512 dmin = _mm512_permutexvar_ps(pair_min[p], _mm512_castps256_ps512(ddv));
            macc[p] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(summs), macc[p]);
        }
    }
    for (int r = 0; r < R; r++) {
        __m512 m = macc[r / 2];
        __m256 mr = r & 1 ? _mm512_extractf32x8_ps(m, 1) : _mm512_castps512_ps256(m);
        out[r] = hsum512(acc[r]) - hsum256(mr);
    }
}

AVX512 static void rows_q2_k(const uint8_t *w, size_t row_stride, size_t n_rows,
                             const void *act, size_t cols, float *y) {
    size_t r = 0;
    for (; r + Q2K_GROUP <= n_rows; r += Q2K_GROUP)
        q2k_group(w + r * row_stride, row_stride, act, cols / 256, y + r);
    for (; r < n_rows; r++) y[r] = dot_q2_k(w + r * row_stride, act, cols);
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

/* Q8_0 decode, Q8_0_GROUP rows at a time: per row exactly the AVX2 row kernel's
 * arithmetic (cpu_dot_avx2.c dot_q8_0: the same int32 lane sums of 4 products, the same
 * block scale f16(w.d) * x.d, even blocks fused into one 8-lane chain and odd blocks into
 * another, the same final reduction), so every output is bit-identical to it and to the
 * prefill tile. What the group shares: each activation load, and the correction of the
 * int8 dot, which takes w + 128 as its unsigned operand and starts from -128 * sum(x)
 * (one per block for all rows); the rows' block scales are converted together. */
enum { Q8_0_GROUP = 4 };

/* Words 0 and 1: the f16 scales of blocks b and b + 1 (wb points at block b). */
AVX512 static inline __m128i q8_0_scale_pair(const uint8_t *wb) {
    return _mm_unpacklo_epi16(_mm_loadu_si32(wb), _mm_loadu_si32(wb + 34));
}

AVX512 static void q8_0_group(const uint8_t *w, size_t row_stride, const ds4_block_q8a *y,
                              size_t nb, float *out) {
    enum { R = Q8_0_GROUP };
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const __m256i zero = _mm256_setzero_si256();
    __m256 a0[R], a1[R];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)y[b].q);
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)y[b + 1].q);
        __m256i c0 = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, flip, x0));
        __m256i c1 = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, flip, x1));
        /* f16 scales (row 4q + r, block b + i) at half 2r + i of quad q, times x.d */
        const uint8_t *wb = w + 34 * b;
        __m256 xd = _mm256_unpacklo_ps(_mm256_set1_ps(y[b].d), _mm256_set1_ps(y[b + 1].d));
        __m256 s[R / 4];
        for (int q = 0; q < R / 4; q++) {
            const uint8_t *wq = wb + 4 * q * row_stride;
            __m128i h01 = _mm_unpacklo_epi32(q8_0_scale_pair(wq), q8_0_scale_pair(wq + row_stride));
            __m128i h23 = _mm_unpacklo_epi32(q8_0_scale_pair(wq + 2 * row_stride),
                                             q8_0_scale_pair(wq + 3 * row_stride));
            s[q] = _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi64(h01, h23)), xd);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t *wr = wb + r * row_stride;
            __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(wr + 2)), flip);
            __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(wr + 36)), flip);
            __m256 sq = s[r / 4];
            a0[r] = _mm256_fmadd_ps(_mm256_permutexvar_ps(_mm256_set1_epi32(2 * (r % 4)), sq),
                                    _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c0, w0, x0)), a0[r]);
            a1[r] = _mm256_fmadd_ps(_mm256_permutexvar_ps(_mm256_set1_epi32(2 * (r % 4) + 1), sq),
                                    _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c1, w1, x1)), a1[r]);
        }
    }
    if (b < nb) {  /* the last, even-chain block */
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)y[b].q);
        __m256i c0 = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, flip, x0));
        for (int r = 0; r < R; r++) {
            const uint8_t *wr = w + r * row_stride + 34 * b;
            __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(wr + 2)), flip);
            a0[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(rd_u16(wr)) * y[b].d),
                                    _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c0, w0, x0)), a0[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum256(_mm256_add_ps(a0[r], a1[r]));
}

AVX512 static void rows_q8_0(const uint8_t *w, size_t row_stride, size_t n_rows,
                             const void *act, size_t cols, float *y) {
    size_t r = 0;
    for (; r + Q8_0_GROUP <= n_rows; r += Q8_0_GROUP)
        q8_0_group(w + r * row_stride, row_stride, act, cols / 32, y + r);
    for (; r < n_rows; r++) y[r] = ds4_dots_avx2.q8_0(w + r * row_stride, act, cols);
}

ds4_rows_fn ds4_rows_avx512_q2_k(void) { return rows_q2_k; }
/* MXFP4 . Q8_0 activation (docs/reference/formats.md §5.10): two blocks per 512-bit
 * step. The 64 weight bytes are the kvalues of (block b low nibbles, high nibbles, block
 * b + 1 low, high), in activation order; VNNI multiplies their magnitudes (at most 12)
 * by the activation codes carrying the weights' signs, so every block's int32 lanes sum
 * to the scalar kernel's isum. Only the f32 accumulation order differs. */
AVX512 static inline __m512i mxfp4_values2(const uint8_t *w) {
    const __m512i kv = _mm512_broadcast_i32x4(
        _mm_load_si128((const __m128i *)(const void *)ds4_mxfp4_kvalues));
    __m128i q0 = _mm_loadu_si128((const __m128i *)(const void *)(w + 1));
    __m128i q1 = _mm_loadu_si128((const __m128i *)(const void *)(w + 18));
    __m256i c0 = _mm256_set_m128i(_mm_srli_epi16(q0, 4), q0);
    __m256i c1 = _mm256_set_m128i(_mm_srli_epi16(q1, 4), q1);
    __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(c0), c1, 1);
    return _mm512_shuffle_epi8(kv, _mm512_and_si512(codes, _mm512_set1_epi8(15)));
}

AVX512 static float dot_mxfp4(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    const __m512i zero = _mm512_setzero_si512();
    size_t nb = cols / 32, b = 0;
    __m512 acc = _mm512_setzero_ps();
    for (; b + 2 <= nb; b += 2, w += 34) {
        __m512i v = mxfp4_values2(w);
        __m512i x = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)y[b].q)),
            _mm256_loadu_si256((const __m256i *)(const void *)y[b + 1].q), 1);
        __m512i xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(v), zero, x);
        __m512i s = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(v), xs);
        __m512 scale = _mm512_insertf32x8(
            _mm512_set1_ps(e8m0_half_to_f32(w[0]) * y[b].d),
            _mm256_set1_ps(e8m0_half_to_f32(w[17]) * y[b + 1].d), 1);
        acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(s), acc);
    }
    float sum = hsum512(acc);
    if (b < nb) {  /* an odd last block: the same products in one 256-bit step */
        __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(w + 1));
        __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q),
                                         _mm256_set1_epi8(15));
        __m256i v = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(
                _mm_load_si128((const __m128i *)(const void *)ds4_mxfp4_kvalues)),
            codes);
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)y[b].q);
        __m256i xs = _mm256_mask_sub_epi8(x, _mm256_movepi8_mask(v), _mm256_setzero_si256(), x);
        __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(v), xs);
        sum += hsum256(_mm256_mul_ps(_mm256_set1_ps(e8m0_half_to_f32(w[0]) * y[b].d),
                                     _mm256_cvtepi32_ps(s)));
    }
    return sum;
}

ds4_rows_fn ds4_rows_avx512_q8_0(void) { return rows_q8_0; }
ds4_dot_fn ds4_dot_avx512_q2_k(void) { return dot_q2_k; }
ds4_dot_fn ds4_dot_avx512_mxfp4(void) { return dot_mxfp4; }
ds4_tile_fn ds4_tile_avx512_q8_0(void) { return tile_q8_0; }

#endif
