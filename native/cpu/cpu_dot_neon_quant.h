/* Quantized NEON kernels, included twice by cpu_dot_neon.c: once with the baseline
 * int8 dot (NEON_DOT16 = dot16_base) and once with SDOT (dot16_sdot), each under its
 * own function attribute (NEON_ATTR) and name suffix (NEON_NAME). NEON_DOT16(acc, a, b)
 * adds the 16 exact products a[i]*b[i] into the int32 lanes of acc (which lane gets
 * which product is unspecified; only the lane total is used).
 *
 * Every block's integer sum is reduced to one int, then scaled exactly as in
 * cpu_dot_scalar.c (same f32 operations in the same order): bit-identical results. */

/* Q8_0 (docs/reference/formats.md §5.2): isum of 32 code products, acc += (dw * dx) * isum. */
NEON_ATTR static float NEON_NAME(dot_q8_0)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 32; b++, w += 34) {
        int32x4_t s = vdupq_n_s32(0);
        s = NEON_DOT16(s, vld1q_s8((const int8_t *)(w + 2)), vld1q_s8(y[b].q));
        s = NEON_DOT16(s, vld1q_s8((const int8_t *)(w + 18)), vld1q_s8(y[b].q + 16));
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)vaddvq_s32(s);
    }
    return acc;
}

/* MXFP4 (docs/reference/formats.md §5.10): the code bytes' low nibbles are values 0..15,
 * the high nibbles 16..31, each looked up in the doubled E2M1 values; then as Q8_0. */
NEON_ATTR static float NEON_NAME(dot_mxfp4)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    const int8x16_t kv = vld1q_s8(ds4_mxfp4_kvalues);
    const uint8x16_t m4 = vdupq_n_u8(15);
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 32; b++, w += 17) {
        uint8x16_t q = vld1q_u8(w + 1);
        int8x16_t lo = vqtbl1q_s8(kv, vandq_u8(q, m4));
        int8x16_t hi = vqtbl1q_s8(kv, vshrq_n_u8(q, 4));
        int32x4_t s = vdupq_n_s32(0);
        s = NEON_DOT16(s, lo, vld1q_s8(y[b].q));
        s = NEON_DOT16(s, hi, vld1q_s8(y[b].q + 16));
        acc += (e8m0_half_to_f32(w[0]) * y[b].d) * (float)vaddvq_s32(s);
    }
    return acc;
}

/* Q2_K (docs/reference/formats.md §5.5). Value v = 128h + 32j + l sits in bits 2j of qs[32h + l];
 * its 16-value sub-block is 8h + 2j + l/16. The 4-bit scale is folded into the 2-bit code
 * first (at most 45), so each 16-value group is one NEON_DOT16. */
NEON_ATTR static float NEON_NAME(dot_q2_k)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const uint8x16_t mask2 = vdupq_n_u8(3);
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 84) {
        const int8_t *q8 = y[b].q;
        uint8x16_t scv = vld1q_u8(w);
        uint8_t sc[16];
        vst1q_u8(sc, vandq_u8(scv, vdupq_n_u8(15)));

        /* summs = sum_k bsums[k] * min_k, exact in int32. */
        uint8x16_t mins = vshrq_n_u8(scv, 4);
        int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        int16x8_t bs0 = vld1q_s16(y[b].bsums), bs1 = vld1q_s16(y[b].bsums + 8);
        int32x4_t ms = vmull_s16(vget_low_s16(m0), vget_low_s16(bs0));
        ms = vmlal_high_s16(ms, m0, bs0);
        ms = vmlal_s16(ms, vget_low_s16(m1), vget_low_s16(bs1));
        ms = vmlal_high_s16(ms, m1, bs1);
        int summs = vaddvq_s32(ms);

        int32x4_t isum = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t b0 = vld1q_u8(w + 16 + 32 * h), b1 = vld1q_u8(w + 32 + 32 * h);
            for (int j = 0; j < 4; j++) {
                int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
                uint8x16_t c0 = vandq_u8(vshlq_u8(b0, shift), mask2);
                uint8x16_t c1 = vandq_u8(vshlq_u8(b1, shift), mask2);
                int k = 8 * h + 2 * j;
                int8x16_t s0 = vreinterpretq_s8_u8(vmulq_u8(c0, vdupq_n_u8(sc[k])));
                int8x16_t s1 = vreinterpretq_s8_u8(vmulq_u8(c1, vdupq_n_u8(sc[k + 1])));
                const int8_t *qv = q8 + 128 * h + 32 * j;
                isum = NEON_DOT16(isum, s0, vld1q_s8(qv));
                isum = NEON_DOT16(isum, s1, vld1q_s8(qv + 16));
            }
        }
        float dall = y[b].d * f16_to_f32(rd_u16(w + 80));
        float dmin = y[b].d * f16_to_f32(rd_u16(w + 82));
        sumf += dall * (float)vaddvq_s32(isum) - dmin * (float)summs;
    }
    return sumf;
}

/* Q4_K (docs/reference/formats.md §4.5): chunk c of 32 bytes holds sub-block 2c in its low nibbles
 * and 2c+1 in its high nibbles; each sub-block sum (|.| <= 32*15*128) times its 6-bit scale
 * is accumulated in int32. */
NEON_ATTR static float NEON_NAME(dot_q4_k)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const uint8x16_t mask4 = vdupq_n_u8(15);
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 144) {
        const int8_t *q8 = y[b].q;
        int sc[8], mn[8], summs = 0;
        for (int j = 0; j < 8; j++) {
            q4k_scale_min(w + 4, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        int32x4_t isum = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
            uint8x16_t b0 = vld1q_u8(w + 16 + 32 * c), b1 = vld1q_u8(w + 32 + 32 * c);
            const int8_t *qv = q8 + 64 * c;
            int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
            lo = NEON_DOT16(lo, vreinterpretq_s8_u8(vandq_u8(b0, mask4)), vld1q_s8(qv));
            lo = NEON_DOT16(lo, vreinterpretq_s8_u8(vandq_u8(b1, mask4)), vld1q_s8(qv + 16));
            hi = NEON_DOT16(hi, vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vld1q_s8(qv + 32));
            hi = NEON_DOT16(hi, vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), vld1q_s8(qv + 48));
            isum = vmlaq_n_s32(isum, lo, sc[2 * c]);
            isum = vmlaq_n_s32(isum, hi, sc[2 * c + 1]);
        }
        float t1 = (y[b].d * f16_to_f32(rd_u16(w))) * (float)vaddvq_s32(isum);
        float t2 = (y[b].d * f16_to_f32(rd_u16(w + 2))) * (float)summs;
        sumf += t1 - t2;
    }
    return sumf;
}

/* IQ2_XXS (docs/reference/formats.md §5.6): the signs are applied to the grid bytes (|value| <= 43,
 * so no int8 overflow), never to the activation codes. */
NEON_ATTR static float NEON_NAME(dot_iq2_xxs)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 66) {
        const int8_t *q8 = y[b].q;
        int32x4_t bsum = vdupq_n_s32(0);
        for (int g = 0; g < 8; g++) {
            uint32_t a = rd_u32(w + 2 + 8 * g), s = rd_u32(w + 6 + 8 * g);
            int8x16_t g0 = vcombine_s8(vcreate_s8(ds4_iq2_grid[a & 255]),
                                       vcreate_s8(ds4_iq2_grid[(a >> 8) & 255]));
            int8x16_t g1 = vcombine_s8(vcreate_s8(ds4_iq2_grid[(a >> 16) & 255]),
                                       vcreate_s8(ds4_iq2_grid[a >> 24]));
            int8x16_t s0 = vcombine_s8(vcreate_s8(ds4_iq2_sign_mask[s & 127]),
                                       vcreate_s8(ds4_iq2_sign_mask[(s >> 7) & 127]));
            int8x16_t s1 = vcombine_s8(vcreate_s8(ds4_iq2_sign_mask[(s >> 14) & 127]),
                                       vcreate_s8(ds4_iq2_sign_mask[(s >> 21) & 127]));
            int32x4_t sumi = vdupq_n_s32(0);
            sumi = NEON_DOT16(sumi, vmulq_s8(g0, s0), vld1q_s8(q8 + 32 * g));
            sumi = NEON_DOT16(sumi, vmulq_s8(g1, s1), vld1q_s8(q8 + 32 * g + 16));
            bsum = vmlaq_n_s32(bsum, sumi, (int32_t)(2 * (s >> 28) + 1));
        }
        sumf += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)vaddvq_s32(bsum);
    }
    return 0.125f * sumf;
}

#include "cpu_dot_neon_kquant.h"
