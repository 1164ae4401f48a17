/* IQ2_XXS prefill tile: several weight rows times a group of tokens, each weight block
 * decoded (grid lookup, signs, group scales) once per row and dotted against up to 8
 * tokens, so the decode that dominates the row kernel is shared by the whole group.
 *
 * Every product repeats the AVX2 row kernel's arithmetic (cpu_dot_avx2.c dot_iq2_xxs)
 * where it touches rounding: the same eight exact int32 lane sums per block (lane l of
 * group g covers values 4l..4l+3, times the group scale), the same f32 block scale
 * f16(w.d) * x.d, one fused multiply-add per block into an 8-lane chain, the same final
 * reduction times 1/8. So a token's result is bit-identical whether it ran alone (row
 * kernel) or in a group (this tile), and integer sums equal the scalar kernel's.
 *
 * The integer part differs from the row kernel only in how it reaches the same sums:
 * signs go onto the weights (once per row and block), activations are read as u8
 * codes + 128 (ds4_cpu_q8k_offset, once per chunk), and -128 * sum(scale * weight) per
 * lane, a weight-only term, is subtracted once per block. */
#include "cpu_internal.h"

void ds4_cpu_q8k_offset(const ds4_block_q8k *x, size_t n_blocks, ds4_block_q8k *out) {
    for (size_t b = 0; b < n_blocks; b++) {
        out[b].d = x[b].d;
        for (int i = 0; i < 256; i++) out[b].q[i] = (int8_t)((uint8_t)x[b].q[i] ^ 0x80u);
        for (int i = 0; i < 16; i++) out[b].bsums[i] = x[b].bsums[i];
    }
}

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_iq2_fields_avx2.h"

#define AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,avx2,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

/* The tile's largest token group per pass: 8 ymm accumulators next to the decoded block. */
enum { IQ2_TILE_TOKS = 8 };

/* Exactly cpu_dot_avx2.c's hsum_ps (the row kernel's final reduction). */
AVX512 static INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One decoded block: 256 signed weights as 4 zmm (groups 2m, 2m+1 in zmm m), the group
 * scales as int16 words matching them, and -128 * (scaled weight sum) per int32 lane. */
typedef struct {
    __m512i w[4], ls[4], corr;
} iq2_block;

AVX512 static INLINE void decode_block(const uint8_t *qs, iq2_block *blk) {
    /* qs: 8 groups of (u32 four grid indices, u32 signs + scale) */
    __m512i z = _mm512_loadu_si512((const void *)qs);
    __m256i idx = _mm512_cvtepi64_epi32(z);                          /* a0..a7 */
    __m256i s = _mm512_cvtepi64_epi32(_mm512_srli_epi64(z, 32));     /* s0..s7 */
    /* per group: its sign fields with their parity bits, and its scale (int16 pairs) */
    __m256i neg, l;
    ds4_iq2_fields_avx2(s, &neg, &l);
    __m512i l2 = _mm512_castsi256_si512(l);
    __m128i ilo = _mm256_castsi256_si128(idx), ihi = _mm256_extracti128_si256(idx, 1);
    __m128i gi[4] = {ilo, _mm_unpackhi_epi64(ilo, ilo), ihi, _mm_unpackhi_epi64(ihi, ihi)};
    const __m512i zero = _mm512_setzero_si512();
    __m512i csum = zero;
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
#ifdef IQ2_GATHER
        __m512i grid = _mm512_i64gather_epi64(_mm512_cvtepu8_epi64(gi[m]),
                                              (const void *)ds4_iq2_grid, 8);
#else
        const uint8_t *ib = qs + 16 * m;
        __m512i grid = _mm512_set_epi64(
            (long long)ds4_iq2_grid[ib[11]], (long long)ds4_iq2_grid[ib[10]],
            (long long)ds4_iq2_grid[ib[9]], (long long)ds4_iq2_grid[ib[8]],
            (long long)ds4_iq2_grid[ib[3]], (long long)ds4_iq2_grid[ib[2]],
            (long long)ds4_iq2_grid[ib[1]], (long long)ds4_iq2_grid[ib[0]]);
        (void)gi;
#endif
        __mmask64 k = _cvtu64_mask64((uint64_t)_mm256_extract_epi64(neg, m));
        blk->w[m] = _mm512_mask_sub_epi8(grid, k, zero, grid);
        blk->ls[m] = _mm512_permutexvar_epi32(
            _mm512_set_epi32(2 * m + 1, 2 * m + 1, 2 * m + 1, 2 * m + 1, 2 * m + 1, 2 * m + 1,
                             2 * m + 1, 2 * m + 1, 2 * m, 2 * m, 2 * m, 2 * m, 2 * m, 2 * m,
                             2 * m, 2 * m),
            l2);
        csum = _mm512_dpwssd_epi32(
            csum, _mm512_maddubs_epi16(_mm512_set1_epi8((char)0x80), blk->w[m]), blk->ls[m]);
    }
    blk->corr = _mm512_sub_epi32(zero, csum);
}

/* Rows of w times nt tokens (nt <= IQ2_TILE_TOKS, a constant after inlining); with
 * plain set the activations hold plain Q8_K codes and are offset here, per load. */
AVX512 static INLINE void rows_times_tokens(const uint8_t *w, size_t row_stride, size_t rows,
                                             const ds4_block_q8k *const *x, const int nt,
                                             size_t nb, float *y, size_t y_stride,
                                             const int plain) {
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *wr = w + r * row_stride;
        __m256 acc[IQ2_TILE_TOKS];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *wb = wr + 66 * b;
            _mm_prefetch((const char *)(wb + 1280), _MM_HINT_T0);
            iq2_block blk;
            decode_block(wb + 2, &blk);
            float dw = _cvtsh_ss(rd_u16(wb));
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const uint8_t *xq = (const uint8_t *)x[t][b].q;
                __m512i s = blk.corr;
#pragma GCC unroll 4
                for (int m = 0; m < 4; m++) {
                    __m512i xv = _mm512_loadu_si512((const void *)(xq + 64 * m));
                    if (plain) xv = _mm512_xor_si512(xv, _mm512_set1_epi8((char)0x80));
                    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(xv, blk.w[m]), blk.ls[m]);
                }
                /* zmm lane l + lane 8 + l: group 2m and 2m + 1 -> the row kernel's lane l */
                __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s),
                                              _mm512_extracti64x4_epi64(s, 1));
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[t][b].d), _mm256_cvtepi32_ps(s8),
                                         acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) y[(size_t)t * y_stride + r] = 0.125f * hsum8(acc[t]);
    }
}

#define NT_CASE(n) \
    case n: rows_times_tokens(w, row_stride, rows, x + t0, n, nb, y + t0 * y_stride, y_stride, 0); break;

/* y[t * y_stride + r] = row r . token t for rows x n_tok, tokens in chunks of 8. */
AVX512 static void tile_iq2_xxs(const uint8_t *w, size_t row_stride, size_t rows,
                                const ds4_block_q8k *const *x, size_t n_tok, size_t cols,
                                float *y, size_t y_stride) {
    size_t nb = cols / 256;
    for (size_t t0 = 0; t0 < n_tok; t0 += IQ2_TILE_TOKS) {
        size_t left = n_tok - t0;
        switch (left < IQ2_TILE_TOKS ? (int)left : IQ2_TILE_TOKS) {
            NT_CASE(1) NT_CASE(2) NT_CASE(3) NT_CASE(4)
            NT_CASE(5) NT_CASE(6) NT_CASE(7) NT_CASE(8)
        }
    }
}
#undef NT_CASE

/* The AVX-512 set's IQ2_XXS row kernel: the tile for one row and one plain activation
 * (the same arithmetic as the AVX2 row kernel, so the same bits, at fewer instructions
 * per block: the decode above replaces the per-group sign shuffles of the AVX2 kernel). */
AVX512 static float dot_iq2_xxs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *x = act;
    float y;
    rows_times_tokens(w, 0, 1, &x, 1, cols / 256, &y, 1, 1);
    return y;
}

ds4_dot_fn ds4_dot_avx512_iq2_xxs(void) {
    ds4_cpu_tables_init();
    return dot_iq2_xxs;
}

ds4_group_tile_fn ds4_tile_avx512_iq2_xxs(void) {
    ds4_cpu_tables_init();
    return tile_iq2_xxs;
}

/* ---- the AVX2 form: one group of 32 weights per ymm, the decoded block kept in L1 ---- */
#define AVX2 __attribute__((target("avx2,fma,f16c")))

typedef struct {
    __m256i w[8], ls[8], corr;
} iq2_block8;

AVX2 static INLINE void decode_block8(const uint8_t *qs, iq2_block8 *blk) {
    __m256 a = _mm256_loadu_ps((const float *)(const void *)qs);
    __m256 b = _mm256_loadu_ps((const float *)(const void *)(qs + 32));
    /* even dwords a0..a7 (grid indices), odd dwords s0..s7 (signs, scale) */
    __m256i idx = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88)), 0xd8);
    __m256i s = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8);
    __m256i neg, l;
    ds4_iq2_fields_avx2(s, &neg, &l);
    uint32_t ia[8], sg[8], lg[8];
    _mm256_storeu_si256((__m256i *)(void *)ia, idx);
    _mm256_storeu_si256((__m256i *)(void *)sg, neg);
    _mm256_storeu_si256((__m256i *)(void *)lg, l);
    /* sign byte k of a group to bytes 8k..8k+7, then bit i of byte 8k + i, + 127:
     * 127 keeps a weight, 128..255 (negative) negates it */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i c127 = _mm256_set1_epi8(127), flip = _mm256_set1_epi8((char)0x80);
    __m256i csum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        __m256i grid = _mm256_i64gather_epi64((const long long *)(const void *)ds4_iq2_grid,
                                              _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int)ia[g])), 8);
        __m256i sgn = _mm256_shuffle_epi8(_mm256_set1_epi32((int)sg[g]), spread);
        sgn = _mm256_add_epi8(_mm256_and_si256(sgn, bit), c127);
        blk->w[g] = _mm256_sign_epi8(grid, sgn);
        blk->ls[g] = _mm256_set1_epi32((int)lg[g]);
        csum = _mm256_add_epi32(csum, _mm256_madd_epi16(_mm256_maddubs_epi16(flip, blk->w[g]),
                                                        blk->ls[g]));
    }
    blk->corr = _mm256_sub_epi32(_mm256_setzero_si256(), csum);
}

AVX2 static INLINE float hsum8_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static INLINE void rows_times_tokens8(const uint8_t *w, size_t row_stride, size_t rows,
                                            const ds4_block_q8k *const *x, const int nt,
                                            size_t nb, float *y, size_t y_stride) {
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *wr = w + r * row_stride;
        __m256 acc[IQ2_TILE_TOKS];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *wb = wr + 66 * b;
            _mm_prefetch((const char *)(wb + 1280), _MM_HINT_T0);
            iq2_block8 blk;
            decode_block8(wb + 2, &blk);
            float dw = _cvtsh_ss(rd_u16(wb));
            for (int t = 0; t < nt; t++) {
                const uint8_t *xq = (const uint8_t *)x[t][b].q;
                __m256i s = blk.corr;
#pragma GCC unroll 8
                for (int g = 0; g < 8; g++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(xq + 32 * g));
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(xv, blk.w[g]),
                                                              blk.ls[g]));
                }
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[t][b].d), _mm256_cvtepi32_ps(s),
                                         acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) y[(size_t)t * y_stride + r] = 0.125f * hsum8_avx2(acc[t]);
    }
}

#define NT_CASE8(n) \
    case n: rows_times_tokens8(w, row_stride, rows, x + t0, n, nb, y + t0 * y_stride, y_stride); break;

AVX2 static void tile_iq2_xxs_avx2(const uint8_t *w, size_t row_stride, size_t rows,
                                   const ds4_block_q8k *const *x, size_t n_tok, size_t cols,
                                   float *y, size_t y_stride) {
    size_t nb = cols / 256;
    for (size_t t0 = 0; t0 < n_tok; t0 += IQ2_TILE_TOKS) {
        size_t left = n_tok - t0;
        switch (left < IQ2_TILE_TOKS ? (int)left : IQ2_TILE_TOKS) {
            NT_CASE8(1) NT_CASE8(2) NT_CASE8(3) NT_CASE8(4)
            NT_CASE8(5) NT_CASE8(6) NT_CASE8(7) NT_CASE8(8)
        }
    }
}
#undef NT_CASE8

ds4_group_tile_fn ds4_tile_avx2_iq2_xxs(void) {
    ds4_cpu_tables_init();
    return tile_iq2_xxs_avx2;
}

#endif
