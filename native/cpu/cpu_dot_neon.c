/* ARM NEON dot products (aarch64 only). Two tables: ds4_dots_neon uses only baseline
 * ARMv8 Advanced SIMD (widening multiplies and pairwise accumulates), and
 * ds4_dots_neon_sdot swaps in the ARMv8.2 SDOT instruction for the int8 sums, chosen
 * at run time when the kernel reports it (getauxval, Linux only).
 *
 * The quantized kernels reduce each block's integer sum exactly (for every int8 code,
 * -128 included, so they do not need the caller's -128 fallback) and then apply the
 * f32 scales in the same order and with the same roundings as cpu_dot_scalar.c, so
 * their results are bit-identical to the scalar kernels. The F32/F16/BF16 kernels
 * accumulate in vector lanes and differ from scalar only in summation order. */
#if defined(__aarch64__)

#include <arm_neon.h>

#include "cpu_internal.h"
#include "ds4_iq4_values.h"
#include "ds4_iq_grids.h"

#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#endif

int ds4_cpu_have_sdot(void) {
#if defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    return 0;  /* no portable query elsewhere: use the baseline table */
#endif
}

/* ---- float weights: lane-wise accumulation, scalar tail ---- */

/* Products of two f32 are exact in f64, so only the f64 summation order changes. */
static float dot_f32(const uint8_t *w, const void *act, size_t cols) {
    const float *x = act;
    float64x2_t a0 = vdupq_n_f64(0.0), a1 = vdupq_n_f64(0.0);
    size_t i = 0;
    for (; i + 4 <= cols; i += 4) {
        float32x4_t wv = vreinterpretq_f32_u8(vld1q_u8(w + 4 * i));
        float32x4_t xv = vld1q_f32(x + i);
        a0 = vfmaq_f64(a0, vcvt_f64_f32(vget_low_f32(wv)), vcvt_f64_f32(vget_low_f32(xv)));
        a1 = vfmaq_f64(a1, vcvt_high_f64_f32(wv), vcvt_high_f64_f32(xv));
    }
    double acc = vaddvq_f64(vaddq_f64(a0, a1));
    for (; i < cols; i++) {
        float wi;
        memcpy(&wi, w + 4 * i, 4);
        acc += (double)wi * (double)x[i];
    }
    return (float)acc;
}

/* Eight halves -> two f32x4 (hardware conversion is exact, subnormals included). */
static inline void load_f16x8(const uint8_t *p, float32x4_t *lo, float32x4_t *hi) {
    float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}

static inline void load_bf16x8(const uint8_t *p, float32x4_t *lo, float32x4_t *hi) {
    uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(p));
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}

#define HALF_DOT(NAME, LOAD8, SCALAR)                                                     \
    static float NAME(const uint8_t *w, const void *act, size_t cols) {                   \
        const float *x = act;                                                              \
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;                     \
        size_t i = 0;                                                                      \
        for (; i + 16 <= cols; i += 16) {                                                  \
            float32x4_t w0, w1, w2, w3;                                                    \
            LOAD8(w + 2 * i, &w0, &w1);                                                    \
            LOAD8(w + 2 * i + 16, &w2, &w3);                                               \
            a0 = vfmaq_f32(a0, w0, vld1q_f32(x + i));                                      \
            a1 = vfmaq_f32(a1, w1, vld1q_f32(x + i + 4));                                  \
            a2 = vfmaq_f32(a2, w2, vld1q_f32(x + i + 8));                                  \
            a3 = vfmaq_f32(a3, w3, vld1q_f32(x + i + 12));                                 \
        }                                                                                  \
        for (; i + 8 <= cols; i += 8) {                                                    \
            float32x4_t w0, w1;                                                            \
            LOAD8(w + 2 * i, &w0, &w1);                                                    \
            a0 = vfmaq_f32(a0, w0, vld1q_f32(x + i));                                      \
            a1 = vfmaq_f32(a1, w1, vld1q_f32(x + i + 4));                                  \
        }                                                                                  \
        float acc = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));           \
        for (; i < cols; i++) acc += SCALAR(rd_u16(w + 2 * i)) * x[i];                     \
        return acc;                                                                        \
    }

HALF_DOT(dot_f16, load_f16x8, f16_to_f32)
HALF_DOT(dot_bf16, load_bf16x8, bf16_to_f32)

/* ---- quantized weights: the block bodies are instantiated twice ---- */

/* acc += 16 signed byte products, exact for all codes: each vmull_s8 lane is at most
 * 128*128 = 2^14 and is widened to int32 before any two are added. */
static inline int32x4_t dot16_base(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

DS4_SDOT static inline int32x4_t dot16_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

#define NEON_ATTR
#define NEON_DOT16 dot16_base
#define NEON_NAME(n) n##_base
#include "cpu_dot_neon_quant.h"
#include "cpu_dot_neon_iquant.h"
#undef NEON_ATTR
#undef NEON_DOT16
#undef NEON_NAME

#define NEON_ATTR DS4_SDOT
#define NEON_DOT16 dot16_sdot
#define NEON_NAME(n) n##_sdot
#include "cpu_dot_neon_quant.h"
#include "cpu_dot_neon_iquant.h"
#undef NEON_ATTR
#undef NEON_DOT16
#undef NEON_NAME

const ds4_dot_table ds4_dots_neon = {
    dot_f32, dot_f16, dot_bf16, dot_q8_0_base, dot_q2_k_base, dot_q4_k_base, dot_iq2_xxs_base,
    dot_mxfp4_base, dot_q3_k_base, dot_q5_k_base, dot_q6_k_base,
    dot_iq4_nl_base, dot_iq4_xs_base, dot_iq2_xs_base,
    dot_iq3_xxs_base, dot_iq3_s_base,
};

const ds4_dot_table ds4_dots_neon_sdot = {
    dot_f32, dot_f16, dot_bf16, dot_q8_0_sdot, dot_q2_k_sdot, dot_q4_k_sdot, dot_iq2_xxs_sdot,
    dot_mxfp4_sdot, dot_q3_k_sdot, dot_q5_k_sdot, dot_q6_k_sdot,
    dot_iq4_nl_sdot, dot_iq4_xs_sdot, dot_iq2_xs_sdot,
    dot_iq3_xxs_sdot, dot_iq3_s_sdot,
};

#endif
