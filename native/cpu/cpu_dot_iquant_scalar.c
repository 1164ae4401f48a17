/* Portable scalar IQ4_NL and IQ4_XS dots (docs/reference/formats.md §5.11), the exact
 * reference of their SIMD twins: integer sums exact, f32 accumulation in block order,
 * built with -ffp-contract=off like cpu_dot_scalar.c. */
#include "cpu_internal.h"
#include "ds4_iq4_values.h"
#include "ds4_iq_grids.h"

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

/* ---- IQ2_XS, IQ3_XXS, IQ3_S . Q8_K (docs/reference/formats.md §5.12): signed grid
 * values times codes, exact per run, times the run's odd multiplier m = 2s + 1; per
 * block acc += (dw * dx) * bsum, and the whole sum times 1/8 (IQ2_XS) or 1/4 (IQ3_XXS),
 * an exact power-of-two scaling, as the numpy reference does. */

/* sum of n grid values (bytes of g, position i) signed by bit i of `signs`, times q8. */
static inline int grid_sum(uint64_t g, unsigned signs, const int8_t *q8, int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) {
        int v = (int)((g >> (8 * i)) & 255);
        sum += ((signs >> i) & 1 ? -v : v) * q8[i];
    }
    return sum;
}

float ds4_dot_scalar_iq2_xs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 74) {
        int bsum = 0;
        for (int h = 0; h < 16; h++) {  /* 16 values: two grid rows under one scale nibble */
            int m = 2 * ((w[66 + h / 2] >> (4 * (h % 2))) & 15) + 1;
            int sub = 0;
            for (int k = 2 * h; k < 2 * h + 2; k++) {
                unsigned q = rd_u16(w + 2 + 2 * k);
                sub += grid_sum(DS4_IQ2XS_GRID[q & 511], ds4_iq2_ksigns[q >> 9], y[b].q + 8 * k, 8);
            }
            bsum += m * sub;
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return 0.125f * acc;
}

float ds4_dot_scalar_iq3_xxs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 98) {
        int bsum = 0;
        for (int r = 0; r < 8; r++) {
            uint32_t aux = rd_u32(w + 66 + 4 * r);
            int sub = 0;
            for (int k = 0; k < 8; k++) {
                unsigned signs = ds4_iq2_ksigns[(aux >> (7 * (k / 2))) & 127] >> (4 * (k % 2));
                sub += grid_sum(DS4_IQ3XXS_GRID[w[2 + 8 * r + k]], signs, y[b].q + 32 * r + 4 * k, 4);
            }
            bsum += (2 * (int)(aux >> 28) + 1) * sub;
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return 0.25f * acc;
}

float ds4_dot_scalar_iq3_s(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 110) {
        int bsum = 0;
        for (int r = 0; r < 8; r++) {
            int sub = 0;
            for (int k = 0; k < 8; k++) {
                int idx = 8 * r + k;
                unsigned gi = w[2 + idx] | (((unsigned)(w[66 + r] >> k) & 1u) << 8);
                unsigned signs = (unsigned)w[74 + idx / 2] >> (4 * (idx % 2));
                sub += grid_sum(DS4_IQ3S_GRID[gi], signs, y[b].q + 4 * idx, 4);
            }
            bsum += (2 * ((w[106 + r / 2] >> (4 * (r % 2))) & 15) + 1) * sub;
        }
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return acc;
}
