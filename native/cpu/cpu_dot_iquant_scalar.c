/* Portable scalar IQ4_NL and IQ4_XS dots (docs/reference/formats.md §5.11), the exact
 * reference of their SIMD twins: integer sums exact, f32 accumulation in block order,
 * built with -ffp-contract=off like cpu_dot_scalar.c. */
#include "cpu_internal.h"
#include "ds4_iq4_values.h"

/* sum over one 32-value run: code byte j holds value j (low nibble) and j + 16 (high). */
static int iq4_run_sum(const uint8_t *qs, const int8_t *q8) {
    int isum = 0;
    for (int j = 0; j < 16; j++) {
        isum += DS4_IQ4_KVALUES[qs[j] & 15] * q8[j];
        isum += DS4_IQ4_KVALUES[qs[j] >> 4] * q8[j + 16];
    }
    return isum;
}

/* IQ4_NL . Q8_0: acc += (dw * dx) * isum per 32-value block. */
float ds4_dot_scalar_iq4_nl(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 32; b++, w += 18)
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)iq4_run_sum(w + 2, y[b].q);
    return acc;
}

/* IQ4_XS . Q8_K: isum = sum_i (s_i - 32) * run_i (|isum| < 8*32*32*127*127 < 2^31),
 * acc += (dw * dx) * isum per 256-value block. */
float ds4_dot_scalar_iq4_xs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 136) {
        unsigned high = rd_u16(w + 2);
        int isum = 0;
        for (int i = 0; i < 8; i++) {
            int s = (int)(((w[4 + i / 2] >> (4 * (i % 2))) & 15) | (((high >> (2 * i)) & 3) << 4));
            isum += (s - 32) * iq4_run_sum(w + 8 + 16 * i, y[b].q + 32 * i);
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)isum;
    }
    return acc;
}
