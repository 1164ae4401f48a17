/* Q3_K, Q5_K and Q6_K . Q8_K NEON dots, included by cpu_dot_neon_quant.h (so twice:
 * baseline and SDOT). Codes are built as signed bytes, each 16-value (Q3_K, Q6_K) or
 * 32-value (Q5_K) sub-block sum is reduced to one int, and the block is scaled exactly
 * as in cpu_dot_kquant_scalar.h: bit-identical results. */

NEON_ATTR static float NEON_NAME(dot_q3_k)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const uint8x16_t m3 = vdupq_n_u8(3), m1 = vdupq_n_u8(1), four = vdupq_n_u8(4);
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 110) {
        const int8_t *q8 = y[b].q;
        uint8x16_t hm[2] = {vld1q_u8(w), vld1q_u8(w + 16)};
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            uint8x16_t qs[2] = {vld1q_u8(w + 32 + 32 * h), vld1q_u8(w + 48 + 32 * h)};
            for (int j = 0; j < 4; j++) {
                int c = 4 * h + j;
                for (int half = 0; half < 2; half++) {
                    uint8x16_t lo = vandq_u8(vshlq_u8(qs[half], vdupq_n_s8((int8_t)(-2 * j))), m3);
                    uint8x16_t hi = vandq_u8(vshlq_u8(hm[half], vdupq_n_s8((int8_t)(-c))), m1);
                    /* q = lo - 4 * (1 - hi) = (lo | hi << 2) - 4 */
                    int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 2))),
                                           vreinterpretq_s8_u8(four));
                    int32x4_t s = NEON_DOT16(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * c + 16 * half));
                    isum += q3k_scale(w + 96, 2 * c + half) * vaddvq_s32(s);
                }
            }
        }
        acc += (f16_to_f32(rd_u16(w + 108)) * y[b].d) * (float)isum;
    }
    return acc;
}

NEON_ATTR static float NEON_NAME(dot_q5_k)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const uint8x16_t m4 = vdupq_n_u8(15), m1 = vdupq_n_u8(1);
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 176) {
        const int8_t *q8 = y[b].q;
        int sc[8], mn[8], summs = 0, isum = 0;
        for (int j = 0; j < 8; j++) {
            q4k_scale_min(w + 4, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        uint8x16_t qh[2] = {vld1q_u8(w + 16), vld1q_u8(w + 32)};
        for (int j = 0; j < 8; j++) {
            int32x4_t s = vdupq_n_s32(0);
            for (int half = 0; half < 2; half++) {
                uint8x16_t bits = vld1q_u8(w + 48 + 32 * (j / 2) + 16 * half);
                uint8x16_t lo = vandq_u8(vshlq_u8(bits, vdupq_n_s8((int8_t)(-4 * (j % 2)))), m4);
                uint8x16_t hi = vandq_u8(vshlq_u8(qh[half], vdupq_n_s8((int8_t)(-j))), m1);
                int8x16_t q = vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4)));
                s = NEON_DOT16(s, q, vld1q_s8(q8 + 32 * j + 16 * half));
            }
            isum += sc[j] * vaddvq_s32(s);
        }
        float t1 = (y[b].d * f16_to_f32(rd_u16(w))) * (float)isum;
        float t2 = (y[b].d * f16_to_f32(rd_u16(w + 2))) * (float)summs;
        sumf += t1 - t2;
    }
    return sumf;
}

NEON_ATTR static float NEON_NAME(dot_q6_k)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    const int8x16_t c32 = vdupq_n_s8(32);
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 210) {
        const int8_t *sc = (const int8_t *)(w + 192), *q8 = y[b].q;
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            for (int k = 0; k < 4; k++) {
                for (int half = 0; half < 2; half++) {
                    uint8x16_t l = vld1q_u8(w + 64 * h + 32 * (k & 1) + 16 * half);
                    uint8x16_t lo = k < 2 ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);
                    uint8x16_t qh = vld1q_u8(w + 128 + 32 * h + 16 * half);
                    uint8x16_t hi = vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(-2 * k))), m3);
                    int8x16_t q =
                        vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), c32);
                    int s = 8 * h + 2 * k + half;
                    int32x4_t d = NEON_DOT16(vdupq_n_s32(0), q, vld1q_s8(q8 + 16 * s));
                    isum += sc[s] * vaddvq_s32(d);
                }
            }
        }
        acc += (f16_to_f32(rd_u16(w + 208)) * y[b].d) * (float)isum;
    }
    return acc;
}
