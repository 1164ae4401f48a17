/* AVX2/FMA/F16C dot products (x86-64 only, chosen at run time). Integer block sums are
 * exact and identical to the scalar kernels; only the f32 accumulation order differs
 * (8 lanes with fused multiply-adds). Codes of -128 are routed to the scalar kernels
 * by the caller, so the _mm256_sign_epi8 tricks below never overflow. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <pthread.h>

#include "cpu_internal.h"
#include "cpu_iq2_fields_avx2.h"
#include "ds4_iq2xxs_levels.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline double hsum_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

AVX2 static inline float f16c(const uint8_t *p) {
    return _cvtsh_ss(rd_u16(p));
}

AVX2 static inline __m256d f32x4_to_pd(__m128 v) { return _mm256_cvtps_pd(v); }

/* f64 accumulation of exact f32 products; four chains, so short rows (a tiny model's
 * 64-wide LM head) are not bound by the FMA latency. */
AVX2 static float dot_f32(const uint8_t *w, const void *act, size_t cols) {
    const float *x = act;
    const float *wf = (const float *)(const void *)w;
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    __m256d a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        __m256 w0 = _mm256_loadu_ps(wf + i), x0 = _mm256_loadu_ps(x + i);
        __m256 w1 = _mm256_loadu_ps(wf + i + 8), x1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_fmadd_pd(f32x4_to_pd(_mm256_castps256_ps128(w0)),
                             f32x4_to_pd(_mm256_castps256_ps128(x0)), a0);
        a1 = _mm256_fmadd_pd(f32x4_to_pd(_mm256_extractf128_ps(w0, 1)),
                             f32x4_to_pd(_mm256_extractf128_ps(x0, 1)), a1);
        a2 = _mm256_fmadd_pd(f32x4_to_pd(_mm256_castps256_ps128(w1)),
                             f32x4_to_pd(_mm256_castps256_ps128(x1)), a2);
        a3 = _mm256_fmadd_pd(f32x4_to_pd(_mm256_extractf128_ps(w1, 1)),
                             f32x4_to_pd(_mm256_extractf128_ps(x1, 1)), a3);
    }
    for (; i + 8 <= cols; i += 8) {
        __m256 wv = _mm256_loadu_ps(wf + i), xv = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_pd(f32x4_to_pd(_mm256_castps256_ps128(wv)),
                             f32x4_to_pd(_mm256_castps256_ps128(xv)), a0);
        a1 = _mm256_fmadd_pd(f32x4_to_pd(_mm256_extractf128_ps(wv, 1)),
                             f32x4_to_pd(_mm256_extractf128_ps(xv, 1)), a1);
    }
    double acc = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < cols; i++) {
        float wi;
        memcpy(&wi, w + 4 * i, 4);
        acc += (double)wi * (double)x[i];
    }
    return (float)acc;
}

AVX2 static inline __m256 load_f16x8(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

AVX2 static inline __m256 load_bf16x8(const uint8_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

#define HALF_DOT(NAME, LOAD8, SCALAR)                                                     \
    AVX2 static float NAME(const uint8_t *w, const void *act, size_t cols) {              \
        const float *x = act;                                                              \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                         \
        size_t i = 0;                                                                      \
        for (; i + 16 <= cols; i += 16) {                                                  \
            a0 = _mm256_fmadd_ps(LOAD8(w + 2 * i), _mm256_loadu_ps(x + i), a0);            \
            a1 = _mm256_fmadd_ps(LOAD8(w + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);   \
        }                                                                                  \
        for (; i + 8 <= cols; i += 8)                                                      \
            a0 = _mm256_fmadd_ps(LOAD8(w + 2 * i), _mm256_loadu_ps(x + i), a0);            \
        float acc = hsum_ps(_mm256_add_ps(a0, a1));                                        \
        for (; i < cols; i++) acc += SCALAR(rd_u16(w + 2 * i)) * x[i];                     \
        return acc;                                                                        \
    }

HALF_DOT(dot_f16, load_f16x8, f16_to_f32)
HALF_DOT(dot_bf16, load_bf16x8, bf16_to_f32)

/* Exact int32 lanes of sum(w*x) for 32 signed bytes; x must not hold -128. */
AVX2 static inline __m256i dot_i8x32(__m256i w, __m256i x) {
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

AVX2 static float dot_q8_0(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    size_t nb = cols / 32, b = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; b + 2 <= nb; b += 2, w += 68) {
        __m256i s0 = dot_i8x32(_mm256_loadu_si256((const __m256i *)(const void *)(w + 2)),
                               _mm256_loadu_si256((const __m256i *)(const void *)y[b].q));
        __m256i s1 = dot_i8x32(_mm256_loadu_si256((const __m256i *)(const void *)(w + 36)),
                               _mm256_loadu_si256((const __m256i *)(const void *)y[b + 1].q));
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(f16c(w) * y[b].d), _mm256_cvtepi32_ps(s0), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(f16c(w + 34) * y[b + 1].d),
                             _mm256_cvtepi32_ps(s1), a1);
    }
    if (b < nb) {
        __m256i s0 = dot_i8x32(_mm256_loadu_si256((const __m256i *)(const void *)(w + 2)),
                               _mm256_loadu_si256((const __m256i *)(const void *)y[b].q));
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(f16c(w) * y[b].d), _mm256_cvtepi32_ps(s0), a0);
    }
    return hsum_ps(_mm256_add_ps(a0, a1));
}

/* MXFP4's 32 values as signed bytes in activation order: the code bytes' low nibbles
 * (values 0..15), then their high nibbles (16..31), each looked up in the kvalues. */
AVX2 static inline __m256i mxfp4_values(const uint8_t *qs) {
    const __m128i kv = _mm_load_si128((const __m128i *)(const void *)ds4_mxfp4_kvalues);
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i q = _mm_loadu_si128((const __m128i *)(const void *)qs);
    __m128i lo = _mm_shuffle_epi8(kv, _mm_and_si128(q, m4));
    __m128i hi = _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    return _mm256_set_m128i(hi, lo);
}

/* MXFP4 . Q8_0 activation: the Q8_0 kernel's shape, values from the nibble lookup. */
AVX2 static float dot_mxfp4(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    size_t nb = cols / 32, b = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; b + 2 <= nb; b += 2, w += 34) {
        __m256i s0 = dot_i8x32(mxfp4_values(w + 1),
                               _mm256_loadu_si256((const __m256i *)(const void *)y[b].q));
        __m256i s1 = dot_i8x32(mxfp4_values(w + 18),
                               _mm256_loadu_si256((const __m256i *)(const void *)y[b + 1].q));
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(e8m0_half_to_f32(w[0]) * y[b].d),
                             _mm256_cvtepi32_ps(s0), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(e8m0_half_to_f32(w[17]) * y[b + 1].d),
                             _mm256_cvtepi32_ps(s1), a1);
    }
    if (b < nb) {
        __m256i s0 = dot_i8x32(mxfp4_values(w + 1),
                               _mm256_loadu_si256((const __m256i *)(const void *)y[b].q));
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(e8m0_half_to_f32(w[0]) * y[b].d),
                             _mm256_cvtepi32_ps(s0), a0);
    }
    return hsum_ps(_mm256_add_ps(a0, a1));
}

/* Shuffle controls giving int16 lanes = scale byte 2m (low 128) / 2m+1 (high 128), as
 * constants: building them on the stack per call cost store-forwarding stalls. */
#define Q2K_LANE(b) b, -128, b, -128, b, -128, b, -128, b, -128, b, -128, b, -128, b, -128
#define Q2K_CTRL(m) {Q2K_LANE(2 * (m)), Q2K_LANE(2 * (m) + 1)}
static const int8_t q2k_scale_ctrl[8][32] __attribute__((aligned(32))) = {
    Q2K_CTRL(0), Q2K_CTRL(1), Q2K_CTRL(2), Q2K_CTRL(3),
    Q2K_CTRL(4), Q2K_CTRL(5), Q2K_CTRL(6), Q2K_CTRL(7),
};
#undef Q2K_CTRL
#undef Q2K_LANE

AVX2 static float dot_q2_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const __m256i mask2 = _mm256_set1_epi8(3);
    const __m128i mask4 = _mm_set1_epi8(15);
    /* isum and the mins term stay int32 lanes per block, each scaled once in f32 */
    __m256 acc = _mm256_setzero_ps(), macc = _mm256_setzero_ps();
    for (size_t b = 0; b < cols / 256; b++, w += 84) {
        const int8_t *q8 = y[b].q;
        __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)w);
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), mask4));
        __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)y[b].bsums);
        __m256i summs = _mm256_madd_epi16(mins, bs);
        __m256i scales = _mm256_broadcastsi128_si256(_mm_and_si128(sc, mask4));
        __m256i isum = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int h = 0; h < 2; h++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(w + 16 + 32 * h));
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), mask2);
                __m256i q8v = _mm256_loadu_si256(
                    (const __m256i *)(const void *)(q8 + 128 * h + 32 * j));
                __m256i p16 = _mm256_maddubs_epi16(q2, q8v);
                const __m256i *ctrl = (const __m256i *)(const void *)q2k_scale_ctrl[4 * h + j];
                __m256i s16 = _mm256_shuffle_epi8(scales, _mm256_load_si256(ctrl));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, s16));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[b].d * f16c(w + 80)), _mm256_cvtepi32_ps(isum),
                              acc);
        macc = _mm256_fmadd_ps(_mm256_set1_ps(y[b].d * f16c(w + 82)), _mm256_cvtepi32_ps(summs),
                               macc);
    }
    return hsum_ps(acc) - hsum_ps(macc);
}

AVX2 static float dot_q4_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const __m256i mask4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    float macc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 144) {
        const int8_t *q8 = y[b].q;
        int sc[8], mn[8], summs = 0;
        for (int j = 0; j < 8; j++) {
            q4k_scale_min(w + 4, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        __m256i isum = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(w + 16 + 32 * c));
            __m256i lo = _mm256_and_si256(bits, mask4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), mask4);
            __m256i plo = _mm256_maddubs_epi16(
                lo, _mm256_loadu_si256((const __m256i *)(const void *)(q8 + 64 * c)));
            __m256i phi = _mm256_maddubs_epi16(
                hi, _mm256_loadu_si256((const __m256i *)(const void *)(q8 + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_set1_epi16((short)sc[2 * c])));
            isum = _mm256_add_epi32(isum,
                                    _mm256_madd_epi16(phi, _mm256_set1_epi16((short)sc[2 * c + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[b].d * f16c(w)), _mm256_cvtepi32_ps(isum), acc);
        macc += (y[b].d * f16c(w + 2)) * (float)summs;
    }
    return hsum_ps(acc) - macc;
}

/* IQ2_XXS side data of one block, stored to side[0..15]. The 8 groups' sign/scale words
 * s_g (the odd u32 of qs) give side[g] = the four 7-bit sign fields of s_g as bytes, each
 * with its parity as bit 7 (ds4_iq2_ksigns), and side[8 + g] = two int16 copies of the
 * group scale 2 * (s_g >> 28) + 1. */
AVX2 static inline void iq2_side(const uint8_t *qs, uint32_t side[16]) {
    __m256 a = _mm256_loadu_ps((const float *)(const void *)qs);
    __m256 b = _mm256_loadu_ps((const float *)(const void *)(qs + 32));
    /* odd dwords: s0 s1 s4 s5 | s2 s3 s6 s7, then qword order 0 2 1 3 -> s0..s7 */
    __m256i s = _mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xdd));
    s = _mm256_permute4x64_epi64(s, 0xd8);
    __m256i k, l;
    ds4_iq2_fields_avx2(s, &k, &l);
    _mm256_store_si256((__m256i *)(void *)side, k);
    _mm256_store_si256((__m256i *)(void *)(side + 8), l);
}

/* ds4_iq2_grid with each 8-byte row repeated 4 times (32 aligned bytes per index), so an
 * aligned load gives row idx at every qword and one blend keeps the wanted one: no
 * shuffle and no cache-line split. 8 KiB, built once on first use. */
static uint64_t iq2_grid_x4[256][4] __attribute__((aligned(64)));
static pthread_once_t iq2_grid_x4_once = PTHREAD_ONCE_INIT;

static void iq2_grid_x4_build(void) {
    static const uint8_t level_value[4] = {8, 25, 43, 0};
    for (int idx = 0; idx < 256; idx++) {
        uint64_t g = 0;
        for (int i = 0; i < 8; i++)
            g |= (uint64_t)level_value[(DS4_IQ2XXS_LEVELS[idx] >> (2 * i)) & 3] << (8 * i);
        for (int k = 0; k < 4; k++) iq2_grid_x4[idx][k] = g;
    }
}

/* The four 8-byte grid rows of one group's index bytes idx[0..3], as 32 bytes. */
AVX2 static inline __m256i iq2_grid4(const uint8_t *idx) {
#define ROW(i) _mm256_load_si256((const __m256i *)(const void *)iq2_grid_x4[idx[i]])
    __m256i g = _mm256_blend_epi32(ROW(0), ROW(1), 0x0c);
    g = _mm256_blend_epi32(g, ROW(2), 0x30);
    return _mm256_blend_epi32(g, ROW(3), 0xc0);
#undef ROW
}

AVX2 static float dot_iq2_xxs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    pthread_once(&iq2_grid_x4_once, iq2_grid_x4_build);
    /* sign byte k of a group goes to bytes 8k..8k+7, then bit i of byte 8k + i */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i c127 = _mm256_set1_epi8(127);
    __m256 acc = _mm256_setzero_ps();
    size_t nb = cols / 256;
    uint32_t side[2][16] __attribute__((aligned(32)));
    if (nb) iq2_side(w + 2, side[0]);
    for (size_t b = 0; b < nb; b++, w += 66) {
        const int8_t *q8 = y[b].q;
        const uint32_t *sd = side[b & 1];
        /* next block's side data now, off the critical path (the last block redoes its own) */
        iq2_side(w + 2 + (b + 1 < nb ? 66 : 0), side[(b + 1) & 1]);
        __m256i bsum = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            __m256i grid = iq2_grid4(w + 2 + 8 * g);
            /* (sign bit of each value) + 127: 127 keeps the code, 128..255 negates it */
            __m256i neg = _mm256_shuffle_epi8(_mm256_set1_epi32((int)sd[g]), spread);
            neg = _mm256_add_epi8(_mm256_and_si256(neg, bit), c127);
            __m256i q8v = _mm256_loadu_si256((const __m256i *)(const void *)(q8 + 32 * g));
            __m256i p16 = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(q8v, neg));
            __m256i l16 = _mm256_set1_epi32((int)sd[8 + g]);
            bsum = _mm256_add_epi32(bsum, _mm256_madd_epi16(p16, l16));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16c(w) * y[b].d), _mm256_cvtepi32_ps(bsum), acc);
    }
    return 0.125f * hsum_ps(acc);
}

#include "cpu_dot_kquant_avx2.h"

const ds4_dot_table ds4_dots_avx2 = {
    dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q2_k, dot_q4_k, dot_iq2_xxs, dot_mxfp4,
    dot_q3_k, dot_q5_k, dot_q6_k,
    ds4_dot_avx2_iq4_nl, ds4_dot_avx2_iq4_xs, ds4_dot_avx2_iq2_xs, ds4_dot_avx2_iq3_xxs,
    ds4_dot_avx2_iq3_s,
};

#endif
