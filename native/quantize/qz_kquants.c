/* Q2_K and Q4_K block quantizers (docs/reference/formats.md §6.4, §6.5); twin of
 * numpy_quantize_kquants.py. */
#include "qz_internal.h"

/* w_i = qw_i * sqrt(sigma2 + x_i^2), sigma2 = factor * sum(x^2) / 256. */
static void block_weights(const float *x, const float *qw, float factor, float *w) {
    float sumsq = 0;
    for (int i = 0; i < 256; i++) sumsq = i ? sumsq + x[i] * x[i] : x[i] * x[i];
    float sigma2 = factor * sumsq / 256.0f;
    for (int i = 0; i < 256; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
}

/* Reference path: super scale = max sub-scale / nmax, sub-scale codes by RTN. */
static float super_scale(int n, float nmax, const float *sub, float *codes) {
    float top = 0;
    for (int j = 0; j < n; j++) {
        if (sub[j] > top) top = sub[j];
    }
    float inv = top > 0 ? nmax / top : 0;
    for (int j = 0; j < n; j++) codes[j] = qz_nearest(inv * sub[j], 0, nmax);
    return top > 0 ? top / nmax : 0;
}

static float sub_sum(int n, const float *w) {
    float s = w[0];
    for (int i = 1; i < n; i++) s += w[i];
    return s;
}

/* Codes from the stored (f16) super scales; the search codes stay where dd == 0. */
static void final_codes(int n_sub, int sub_len, float nmax, const float *x, float d, float dmin,
                        const float *sc, const float *mn, float *L) {
    float d16 = qz_round_f16(d), m16 = qz_round_f16(dmin);
    for (int j = 0; j < n_sub; j++) {
        float dd = d16 * sc[j];
        if (dd == 0) continue;
        float m = m16 * mn[j];
        for (int i = 0; i < sub_len; i++) {
            int v = j * sub_len + i;
            L[v] = qz_nearest((x[v] + m) / dd, 0, nmax);
        }
    }
}

void qz_q2_k_block(const float *x, const float *qw, uint8_t *out) {
    float w[256], L[256], La[16], scale[16], mins[16], ls[16], lm[16], d, dmin;
    if (!qw) {
        for (int i = 0; i < 256; i++) w[i] = fabsf(x[i]);
        for (int j = 0; j < 16; j++)
            qz_make_qkx(16, 3, x + 16 * j, w + 16 * j, -0.5f, 0.1f, 15, 1, &scale[j], &mins[j],
                        L + 16 * j, La);
        d = super_scale(16, 15, scale, ls);
        dmin = super_scale(16, 15, mins, lm);
    } else {
        float sw[16];
        block_weights(x, qw, 1.0f, w);
        for (int j = 0; j < 16; j++) {
            qz_make_qkx(16, 3, x + 16 * j, w + 16 * j, -0.9f, 0.05f, 36, 0, &scale[j], &mins[j],
                        L + 16 * j, La);
            sw[j] = sub_sum(16, w + 16 * j);
        }
        d = qz_make_qp(16, 15, scale, sw, ls);
        dmin = qz_make_qp(16, 15, mins, sw, lm);
    }
    final_codes(16, 16, 3, x, d, dmin, ls, lm, L);
    for (int j = 0; j < 16; j++) out[j] = (uint8_t)((int)ls[j] | ((int)lm[j] << 4));
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            const float *q = L + 128 * h + l;
            out[16 + 32 * h + l] =
                (uint8_t)((int)q[0] | ((int)q[32] << 2) | ((int)q[64] << 4) | ((int)q[96] << 6));
        }
    }
    qz_put_u16(out + 80, qz_f32_to_f16(d));
    qz_put_u16(out + 82, qz_f32_to_f16(dmin));
}

/* The 8 sub-blocks' scales and minimums of a Q4_K / Q5_K block (codes 0..nmax), their
 * 6-bit codes, and the block header: f16 d, f16 dmin, the 12 packed scale bytes. Without
 * an importance vector the search uses rmin (and iters rounds); with one, Q4_K's
 * weighted settings. L receives the final codes. */
static void qkx_k_block(const float *x, const float *qw, int nmax, float rmin, int iters,
                        float *L, uint8_t *out) {
    float w[256], La[32], scale[8], mins[8], ls[8], lm[8], d, dmin;
    if (!qw) {
        for (int j = 0; j < 8; j++) {
            const float *xj = x + 32 * j;
            float sumsq = xj[0] * xj[0];
            for (int i = 1; i < 32; i++) sumsq += xj[i] * xj[i];
            float av = sqrtf(sumsq / 32.0f);
            for (int i = 0; i < 32; i++) w[32 * j + i] = av + fabsf(xj[i]);
            qz_make_qkx(32, nmax, xj, w + 32 * j, rmin, 0.1f, iters, 0, &scale[j], &mins[j],
                        L + 32 * j, La);
        }
        d = super_scale(8, 63, scale, ls);
        dmin = super_scale(8, 63, mins, lm);
    } else {
        float sw[8];
        block_weights(x, qw, 2.0f, w);
        for (int j = 0; j < 8; j++) {
            qz_make_qkx(32, nmax, x + 32 * j, w + 32 * j, -0.9f, 0.05f, 36, 0, &scale[j],
                        &mins[j], L + 32 * j, La);
            sw[j] = sub_sum(32, w + 32 * j);
        }
        d = qz_make_qp(8, 63, scale, sw, ls);
        dmin = qz_make_qp(8, 63, mins, sw, lm);
    }
    final_codes(8, 32, nmax, x, d, dmin, ls, lm, L);
    qz_put_u16(out, qz_f32_to_f16(d));
    qz_put_u16(out + 2, qz_f32_to_f16(dmin));
    uint8_t *sc = out + 4;
    for (int j = 0; j < 4; j++) {
        sc[j] = (uint8_t)ls[j];
        sc[j + 4] = (uint8_t)lm[j];
    }
    for (int j = 4; j < 8; j++) {
        int s = (int)ls[j], m = (int)lm[j];
        sc[j + 4] = (uint8_t)((s & 15) | ((m & 15) << 4));
        sc[j - 4] |= (uint8_t)((s >> 4) << 6);
        sc[j] |= (uint8_t)((m >> 4) << 6);
    }
}

void qz_q4_k_block(const float *x, const float *qw, uint8_t *out) {
    float L[256];
    qkx_k_block(x, qw, 15, -1.0f, 20, L, out);
    uint8_t *qs = out + 16;
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)((int)L[64 * c + l] | ((int)L[64 * c + 32 + l] << 4));
    }
}

/* Q3_K, Q5_K, Q6_K (docs/reference/formats.md §4.14); twin of adapters/quant/kquant_blocks.py. */

/* Symmetric round-to-nearest over 16 sub-blocks of 16: sub-scale amax / qmax, super
 * scale and scale codes 0..smax (super_scale), codes from the stored f16 super scale in
 * -qmax..qmax (0 where the sub-block's scale is 0). Returns the super scale. */
static float symmetric_block(const float *x, float qmax, float smax, float *sc, float *q) {
    float sub[16];
    for (int k = 0; k < 16; k++) {
        float amax = 0;
        for (int i = 0; i < 16; i++) {
            float a = fabsf(x[16 * k + i]);
            if (a > amax) amax = a;
        }
        sub[k] = amax / qmax;
    }
    float d = super_scale(16, smax, sub, sc);
    float d16 = qz_round_f16(d);
    for (int k = 0; k < 16; k++) {
        float dd = d16 * sc[k];
        for (int i = 0; i < 16; i++)
            q[16 * k + i] = dd == 0 ? 0 : qz_nearest(x[16 * k + i] / dd, -qmax, qmax);
    }
    return d;
}

void qz_q3_k_block(const float *x, uint8_t *out) {
    float sc[16], q[256];
    float d = symmetric_block(x, 3, 31, sc, q);
    memset(out, 0, 110);
    uint8_t *hmask = out, *qs = out + 32, *scales = out + 96;
    for (int k = 0; k < 16; k++) {
        int s = (int)sc[k] + 32;
        scales[k % 8] |= (uint8_t)((s & 15) << (k < 8 ? 0 : 4));
        scales[8 + k % 4] |= (uint8_t)((s >> 4) << (2 * (k / 4)));
    }
    for (int v = 0; v < 256; v++) {
        int c = (int)q[v], h = v / 128, j = (v % 128) / 32, l = v % 32;
        if (c >= 0) hmask[l] |= (uint8_t)(1u << (v / 32));
        qs[32 * h + l] |= (uint8_t)((c & 3) << (2 * j));
    }
    qz_put_u16(out + 108, qz_f32_to_f16(d));
}

void qz_q6_k_block(const float *x, uint8_t *out) {
    float sc[16], q[256];
    float d = symmetric_block(x, 31, 127, sc, q);
    memset(out, 0, 210);
    uint8_t *ql = out, *qh = out + 128;
    for (int v = 0; v < 256; v++) {
        int u = (int)q[v] + 32, h = v / 128, r = v % 128;
        ql[64 * h + r % 64] |= (uint8_t)((u & 15) << (4 * (r / 64)));
        qh[32 * h + r % 32] |= (uint8_t)((u >> 4) << (2 * (r / 32)));
    }
    for (int k = 0; k < 16; k++) out[192 + k] = (uint8_t)(int)sc[k];
    qz_put_u16(out + 208, qz_f32_to_f16(d));
}

void qz_q5_k_block(const float *x, const float *qw, uint8_t *out) {
    float L[256];
    qkx_k_block(x, qw, 31, -0.5f, 15, L, out);
    uint8_t *qh = out + 16, *qs = out + 48;
    memset(qh, 0, 32);
    for (int j = 0; j < 8; j++) {
        for (int l = 0; l < 32; l++) qh[l] |= (uint8_t)(((int)L[32 * j + l] >> 4) << j);
    }
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] =
                (uint8_t)(((int)L[64 * c + l] & 15) | (((int)L[64 * c + 32 + l] & 15) << 4));
    }
}
