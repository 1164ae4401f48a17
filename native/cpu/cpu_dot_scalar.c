/* Portable scalar dot products: the nominal formulas of docs/reference/formats.md §5, integer parts
 * exact, f32 accumulation in block (or index) order. Built with -ffp-contract=off so
 * every f32 product and sum rounds once; this is the bit-exact reference kernel. */
#include "cpu_internal.h"

/* F32 2-D weights accumulate exact products in f64 (docs/reference/model.md §4.1). */
static float dot_f32(const uint8_t *w, const void *act, size_t cols) {
    const float *x = act;
    double acc = 0.0;
    for (size_t i = 0; i < cols; i++) {
        float wi;
        memcpy(&wi, w + 4 * i, 4);
        acc += (double)wi * (double)x[i];
    }
    return (float)acc;
}

static float dot_f16(const uint8_t *w, const void *act, size_t cols) {
    const float *x = act;
    float acc = 0.0f;
    for (size_t i = 0; i < cols; i++) acc += f16_to_f32(rd_u16(w + 2 * i)) * x[i];
    return acc;
}

static float dot_bf16(const uint8_t *w, const void *act, size_t cols) {
    const float *x = act;
    float acc = 0.0f;
    for (size_t i = 0; i < cols; i++) acc += bf16_to_f32(rd_u16(w + 2 * i)) * x[i];
    return acc;
}

static float dot_q8_0(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 32; b++, w += 34) {
        const int8_t *q = (const int8_t *)(w + 2);
        int isum = 0;
        for (int i = 0; i < 32; i++) isum += q[i] * y[b].q[i];
        acc += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)isum;
    }
    return acc;
}

static float dot_q2_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 84) {
        const uint8_t *sc = w, *qs = w + 16;
        const int8_t *q8 = y[b].q;
        int summs = 0, isum = 0;
        for (int k = 0; k < 16; k++) summs += y[b].bsums[k] * (sc[k] >> 4);
        for (int k = 0; k < 16; k++) {
            int sub = 0;
            for (int v = 16 * k; v < 16 * k + 16; v++) {
                int h = v / 128, j = (v % 128) / 32, l = v % 32;
                sub += ((qs[32 * h + l] >> (2 * j)) & 3) * q8[v];
            }
            isum += (sc[k] & 15) * sub;
        }
        float dall = y[b].d * f16_to_f32(rd_u16(w + 80));
        float dmin = y[b].d * f16_to_f32(rd_u16(w + 82));
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    return sumf;
}

static float dot_q4_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 144) {
        const uint8_t *scales = w + 4, *qs = w + 16;
        const int8_t *q8 = y[b].q;
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            q4k_scale_min(scales, j, &sc, &mn);
            int sub = 0;
            for (int v = 32 * j; v < 32 * j + 32; v++) {
                uint8_t byte = qs[32 * (v / 64) + v % 32];
                int q = (v % 64) < 32 ? (byte & 15) : (byte >> 4);
                sub += q * q8[v];
            }
            isum += sc * sub;
            summs += mn * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        float t1 = (y[b].d * f16_to_f32(rd_u16(w))) * (float)isum;
        float t2 = (y[b].d * f16_to_f32(rd_u16(w + 2))) * (float)summs;
        sumf += t1 - t2;
    }
    return sumf;
}

static float dot_iq2_xxs(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 66) {
        const int8_t *q8 = y[b].q;
        int bsum = 0;  /* at most 43*127*256*31 < 2^31 */
        for (int g = 0; g < 8; g++) {
            uint32_t a = rd_u32(w + 2 + 8 * g), s = rd_u32(w + 6 + 8 * g);
            int ls = 2 * (int)(s >> 28) + 1;
            int sumi = 0;
            for (int k = 0; k < 4; k++) {
                uint64_t grid = ds4_iq2_grid[(a >> (8 * k)) & 255];
                uint8_t signs = ds4_iq2_ksigns[(s >> (7 * k)) & 127];
                for (int i = 0; i < 8; i++) {
                    int gv = (int)((grid >> (8 * i)) & 255);
                    int v = (signs >> i) & 1 ? -gv : gv;
                    sumi += v * q8[32 * g + 8 * k + i];
                }
            }
            bsum += sumi * ls;
        }
        sumf += (f16_to_f32(rd_u16(w)) * y[b].d) * (float)bsum;
    }
    return 0.125f * sumf;
}

/* MXFP4 . Q8_0 activation (docs/reference/formats.md §5.10): value j of a block is the
 * low nibble of code byte j, value j + 16 its high nibble; acc += (dw * dx) * isum. */
static float dot_mxfp4(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8a *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 32; b++, w += 17) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += ds4_mxfp4_kvalues[w[1 + j] & 15] * y[b].q[j];
            isum += ds4_mxfp4_kvalues[w[1 + j] >> 4] * y[b].q[j + 16];
        }
        acc += (e8m0_half_to_f32(w[0]) * y[b].d) * (float)isum;
    }
    return acc;
}

#include "cpu_dot_kquant_scalar.h"

const ds4_dot_table ds4_dots_scalar = {
    dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q2_k, dot_q4_k, dot_iq2_xxs, dot_mxfp4,
    dot_q3_k, dot_q5_k, dot_q6_k,
    ds4_dot_scalar_iq4_nl, ds4_dot_scalar_iq4_xs, ds4_dot_scalar_iq2_xs, ds4_dot_scalar_iq3_xxs,
    ds4_dot_scalar_iq3_s,
};
