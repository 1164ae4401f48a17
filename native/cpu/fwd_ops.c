/* Strict element-wise primitives of docs/reference/model.md §2, §3.2: every f32 operation rounds
 * once (-ffp-contract=off, no fast-math), sums run from 0 in index order, and the
 * transcendentals are libm's f32 functions, as the validated reference build does. */
#include <math.h>
#include <string.h>

#include "fwd_internal.h"

void ds4_fw_rmsnorm(const float *x, const float *w, size_t n, float eps, float *y) {
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    float s = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * s;
        y[i] = w ? v * w[i] : v;
    }
}

void ds4_fw_rope(float *tail, int n_rot, int64_t pos, float base, float yarn_factor,
                 const float *ramp, int inverse) {
    float ts = powf(base, -2.0f / (float)n_rot);
    float th_ex = (float)pos;
    float inv_factor = 1.0f / yarn_factor;
    for (int k = 0; k < n_rot / 2; k++) {
        float th = th_ex;
        if (ramp) {
            float th_in = th_ex * inv_factor;
            th = th_in * (1.0f - ramp[k]) + th_ex * ramp[k];
        }
        float c = cosf(th), s = sinf(th);
        if (inverse) s = -s;
        float x0 = tail[2 * k], x1 = tail[2 * k + 1];
        tail[2 * k] = x0 * c - x1 * s;
        tail[2 * k + 1] = x0 * s + x1 * c;
        th_ex = th_ex * ts;
    }
}

/* The HF form (fp32 numerics): angle = f32(pos) * inv_freq[k]. */
void ds4_fw_rope_direct(float *tail, int n_rot, int64_t pos, const float *inv_freq,
                        int inverse) {
    float p = (float)pos;
    for (int k = 0; k < n_rot / 2; k++) {
        float th = p * inv_freq[k];
        float c = cosf(th), s = sinf(th);
        if (inverse) s = -s;
        float x0 = tail[2 * k], x1 = tail[2 * k + 1];
        tail[2 * k] = x0 * c - x1 * s;
        tail[2 * k + 1] = x0 * s + x1 * c;
    }
}

/* Round |u| (finite, already clamped to the format's range) to a minifloat grid with
 * `mant` mantissa bits and smallest normal exponent `min_exp`; ties to even mantissa
 * (the multiple's parity is the mantissa's, and rintf rounds ties to even). */
static float round_minifloat(float u, int mant, int min_exp) {
    float mag = fabsf(u);
    if (mag == 0.0f) return u;
    int e;
    frexpf(mag, &e);  /* mag = m * 2^e, m in [0.5, 1) */
    e -= 1;
    if (e < min_exp) e = min_exp;
    float step = ldexpf(1.0f, e - mant);
    float r = rintf(mag / step) * step;
    return copysignf(r, u);
}

/* The power-of-two block scale 2^ceil(log2(max(amax, floor) / top)), log2f in f32. */
static float block_scale(const float *v, size_t n, float floor, float top) {
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, floor);
    return ldexpf(1.0f, (int)ceilf(log2f(amax / top)));
}

void ds4_fw_fp8_kv_sim(float *v, size_t n_nope) {
    for (size_t b = 0; b + 64 <= n_nope; b += 64) {
        float scale = block_scale(v + b, 64, 1e-4f, 448.0f);
        for (size_t i = b; i < b + 64; i++) {
            float u = fminf(fmaxf(v[i] / scale, -448.0f), 448.0f);
            v[i] = round_minifloat(u, 3, -6) * scale;
        }
    }
}

/* Nearest of {0, .5, 1, 1.5, 2, 3, 4, 6}; a tie goes to the even-indexed entry. */
static float e2m1_round(float a) {
    if (a <= 0.25f) return 0.0f;
    if (a < 0.75f) return 0.5f;
    if (a <= 1.25f) return 1.0f;
    if (a < 1.75f) return 1.5f;
    if (a <= 2.5f) return 2.0f;
    if (a < 3.5f) return 3.0f;
    if (a <= 5.0f) return 4.0f;
    return 6.0f;
}

void ds4_fw_fp4_sim(float *v, size_t n) {
    for (size_t b = 0; b + 32 <= n; b += 32) {
        float scale = block_scale(v + b, 32, 7.052966104933725e-38f, 6.0f);
        for (size_t i = b; i < b + 32; i++) {
            float u = fminf(fmaxf(v[i] / scale, -6.0f), 6.0f);
            v[i] = copysignf(e2m1_round(fabsf(u)), u) * scale;
        }
    }
}

void ds4_fw_hadamard128(float *v) {
    for (int h = 1; h < 128; h *= 2) {
        for (int i = 0; i < 128; i += 2 * h) {
            for (int j = i; j < i + h; j++) {
                float a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
        }
    }
    for (int i = 0; i < 128; i++) v[i] *= 0.08838834764831845f;
}

float ds4_fw_sigmoid_stable(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

float ds4_fw_softplus(float x) {
    if (x > 20.0f) return x;
    if (x < -20.0f) return expf(x);
    return log1pf(expf(x));
}

void ds4_fw_f16round(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = ds4_f16_to_f32_exact(ds4_f32_to_f16_rne(v[i]));
}

void ds4_fw_hc_split(const float *mix, const float *scale, const float *base, int n_hc,
                     int iters, float eps, float *pre, float *post, float *comb) {
    int s = n_hc;
    for (int i = 0; i < s; i++) {
        pre[i] = 1.0f / (1.0f + expf(-(mix[i] * scale[0] + base[i]))) + eps;
        post[i] = 2.0f / (1.0f + expf(-(mix[s + i] * scale[1] + base[s + i])));
    }
    float *c = comb;
    for (int a = 0; a < s; a++) {
        const float *l = mix + 2 * s + a * s;
        const float *b0 = base + 2 * s + a * s;
        float row[DS4_FW_MAX_HC];
        float mx = -INFINITY;
        for (int b = 0; b < s; b++) {
            row[b] = l[b] * scale[2] + b0[b];
            mx = b == 0 ? row[b] : fmaxf(mx, row[b]);
        }
        float sum = 0.0f;
        for (int b = 0; b < s; b++) {
            row[b] = expf(row[b] - mx);
            sum += row[b];
        }
        float r = 1.0f / sum;
        for (int b = 0; b < s; b++) c[a * s + b] = row[b] * r + eps;
    }
    for (int it = 0; it < iters; it++) {
        if (it > 0) {  /* rows: the first iteration's row step was the softmax */
            for (int a = 0; a < s; a++) {
                float sum = 0.0f;
                for (int b = 0; b < s; b++) sum += c[a * s + b];
                float r = 1.0f / (sum + eps);
                for (int b = 0; b < s; b++) c[a * s + b] *= r;
            }
        }
        for (int b = 0; b < s; b++) {
            float sum = 0.0f;
            for (int a = 0; a < s; a++) sum += c[a * s + b];
            float r = 1.0f / (sum + eps);
            for (int a = 0; a < s; a++) c[a * s + b] *= r;
        }
    }
}
