/* NEON IQ4_NL and IQ4_XS dots (docs/reference/formats.md §5.11), included twice by
 * cpu_dot_neon.c next to cpu_dot_neon_quant.h (baseline and SDOT: NEON_ATTR, NEON_DOT16,
 * NEON_NAME). The codes are looked up in the level table with one vqtbl1q per 16
 * values; every block's integer sum is reduced to one int and scaled exactly as in
 * cpu_dot_iquant_scalar.c: bit-identical results. */

/* Exact sum of one 32-value run: levels of the 16 code bytes' low nibbles (values 0..15)
 * and high nibbles (16..31) times the activation codes. */
NEON_ATTR static inline int NEON_NAME(iq4_run)(const uint8_t *qs, const int8_t *q8) {
    const int8x16_t kv = vld1q_s8(DS4_IQ4_KVALUES);
    uint8x16_t q = vld1q_u8(qs);
    int8x16_t lo = vqtbl1q_s8(kv, vandq_u8(q, vdupq_n_u8(15)));
    int8x16_t hi = vqtbl1q_s8(kv, vshrq_n_u8(q, 4));
    int32x4_t s = vdupq_n_s32(0);
    s = NEON_DOT16(s, lo, vld1q_s8(q8));
    s = NEON_DOT16(s, hi, vld1q_s8(q8 + 16));
    return vaddvq_s32(s);
}

NEON_ATTR static float NEON_NAME(dot_iq4_nl)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 32; b++, w += 18)
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)NEON_NAME(iq4_run)(w + 2, y[b].q);
    return acc;
}

NEON_ATTR static float NEON_NAME(dot_iq4_xs)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 136) {
        unsigned high = rd_u16(w + 2);
        int isum = 0;
        for (int i = 0; i < 8; i++) {
            int s = (int)(((w[4 + i / 2] >> (4 * (i % 2))) & 15) | (((high >> (2 * i)) & 3) << 4));
            isum += (s - 32) * NEON_NAME(iq4_run)(w + 8 + 16 * i, y[b].q + 32 * i);
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)isum;
    }
    return acc;
}
