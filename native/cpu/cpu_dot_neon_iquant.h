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

/* ---- IQ2_XS, IQ3_XXS, IQ3_S (docs/reference/formats.md §5.12): per 16 values the grid
 * bytes are signed by multiplying with 0x01 / 0xff byte masks (|g| <= 62: exact), then
 * one NEON_DOT16 with the codes (-128 included); each run's sum times its odd multiplier,
 * each block's sum scaled as in cpu_dot_iquant_scalar.c: bit-identical results. */

NEON_ATTR static inline int NEON_NAME(grid16)(uint64_t g0, uint64_t g1, uint64_t s0, uint64_t s1,
                                             const int8_t *q8) {
    int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g0), vcreate_u64(g1)));
    int8x16_t s = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(s0), vcreate_u64(s1)));
    return vaddvq_s32(NEON_DOT16(vdupq_n_s32(0), vmulq_s8(g, s), vld1q_s8(q8)));
}

NEON_ATTR static float NEON_NAME(dot_iq2_xs)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 74) {
        int bsum = 0;
        for (int h = 0; h < 16; h++) {
            unsigned q0 = rd_u16(w + 2 + 4 * h), q1 = rd_u16(w + 4 + 4 * h);
            int m = 2 * ((w[66 + h / 2] >> (4 * (h % 2))) & 15) + 1;
            bsum += m * NEON_NAME(grid16)(DS4_IQ2XS_GRID[q0 & 511], DS4_IQ2XS_GRID[q1 & 511],
                                          ds4_iq2_sign_mask[q0 >> 9], ds4_iq2_sign_mask[q1 >> 9],
                                          y[b].q + 16 * h);
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return 0.125f * acc;
}

NEON_ATTR static float NEON_NAME(dot_iq3_xxs)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 98) {
        int bsum = 0;
        for (int r = 0; r < 8; r++) {
            const uint8_t *g = w + 2 + 8 * r;
            uint32_t aux = rd_u32(w + 66 + 4 * r);
            int sub = 0;
            for (int c = 0; c < 2; c++) {
                const uint8_t *gc = g + 4 * c;
                uint64_t g0 = DS4_IQ3XXS_GRID[gc[0]] | ((uint64_t)DS4_IQ3XXS_GRID[gc[1]] << 32);
                uint64_t g1 = DS4_IQ3XXS_GRID[gc[2]] | ((uint64_t)DS4_IQ3XXS_GRID[gc[3]] << 32);
                sub += NEON_NAME(grid16)(g0, g1, ds4_iq2_sign_mask[(aux >> (14 * c)) & 127],
                                         ds4_iq2_sign_mask[(aux >> (14 * c + 7)) & 127],
                                         y[b].q + 32 * r + 16 * c);
            }
            bsum += (2 * (int)(aux >> 28) + 1) * sub;
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return 0.25f * acc;
}

/* 8 byte masks (0x01 / 0xff) from the bits of one IQ3_S sign byte. */
static inline uint64_t NEON_NAME(bit_masks)(unsigned bits) {
    uint64_t m = 0;
    for (int i = 0; i < 8; i++) m |= (uint64_t)((bits >> i) & 1 ? 0xffu : 0x01u) << (8 * i);
    return m;
}

NEON_ATTR static float NEON_NAME(dot_iq3_s)(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 110) {
        int bsum = 0;
        for (int r = 0; r < 8; r++) {
            unsigned hi = w[66 + r];
            int sub = 0;
            for (int c = 0; c < 2; c++) {
                uint64_t e[4];
                for (int k = 0; k < 4; k++) {
                    int idx = 4 * c + k;
                    e[k] = DS4_IQ3S_GRID[w[2 + 8 * r + idx] | (((hi >> idx) & 1u) << 8)];
                }
                const uint8_t *sb = w + 74 + 4 * r + 2 * c;
                sub += NEON_NAME(grid16)(e[0] | (e[1] << 32), e[2] | (e[3] << 32),
                                         NEON_NAME(bit_masks)(sb[0]), NEON_NAME(bit_masks)(sb[1]),
                                         y[b].q + 32 * r + 16 * c);
            }
            bsum += (2 * ((w[106 + r / 2] >> (4 * (r % 2))) & 15) + 1) * sub;
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return acc;
}
