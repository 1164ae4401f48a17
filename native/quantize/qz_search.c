/* Shared quantizer searches (docs/reference/formats.md §6.2); twin of numpy_quantize_search.py.
 * Sums start from their first term and run left to right, as numpy's cumsum does. */
#include "qz_internal.h"

static float qz_err(float diff, int use_mad) { return use_mad ? fabsf(diff) : diff * diff; }

void qz_make_qkx(int n, float nmax, const float *x, const float *w, float rmin, float rdelta,
                 int nstep, int use_mad, float *scale_out, float *min_out, float *L, float *La) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
    }
    for (int i = 1; i < n; i++) {
        if (x[i] > mx) mx = x[i];
    }
    float sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0) mn = 0;
    if (mx == mn) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *scale_out = 0;
        *min_out = -mn;
        return;
    }
    float iscale = nmax / (mx - mn);
    float scale = 1.0f / iscale;
    float best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = qz_nearest(iscale * (x[i] - mn), 0, nmax);
        float e = w[i] * qz_err(scale * L[i] + mn - x[i], use_mad);
        best = i ? best + e : e;
    }
    for (int k = 0; k <= nstep; k++) {
        float step = rmin + rdelta * (float)k + nmax;
        float isk = step / (mx - mn);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            La[i] = qz_nearest(isk * (x[i] - mn), 0, nmax);
            float wl = w[i] * La[i];
            sl = i ? sl + wl : wl;
            sl2 = i ? sl2 + wl * La[i] : wl * La[i];
            sxl = i ? sxl + wl * x[i] : wl * x[i];
        }
        float det = sum_w * sl2 - sl * sl;
        if (!(det > 0)) continue;
        float s = (sum_w * sxl - sum_x * sl) / det;
        float m = (sl2 * sum_x - sl * sxl) / det;
        if (m > 0) {
            m = 0;
            s = sxl / sl2;
        }
        float e = 0;
        for (int i = 0; i < n; i++) {
            float t = w[i] * qz_err(s * La[i] + m - x[i], use_mad);
            e = i ? e + t : t;
        }
        if (e < best) {
            memcpy(L, La, (size_t)n * sizeof *L);
            best = e;
            scale = s;
            mn = m;
        }
    }
    *scale_out = scale;
    *min_out = -mn;
}

/* Weighted squared error of x against step*L with L = nearest(is*x). */
static float qp_error(int n, float nmax, const float *x, const float *w, float is, float step) {
    float e = 0;
    for (int i = 0; i < n; i++) {
        float l = qz_nearest(is * x[i], 0, nmax);
        float diff = x[i] - step * l;
        float t = w[i] * diff * diff;
        e = i ? e + t : t;
    }
    return e;
}

float qz_make_qp(int n, float nmax, const float *x, const float *w, float *L) {
    float mx = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] > mx) mx = x[i];
    }
    if (mx < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0;
    }
    float iscale = nmax / mx;
    float best = qp_error(n, nmax, x, w, iscale, 1.0f / iscale);
    static const int ks[8] = {-4, -3, -2, -1, 1, 2, 3, 4};
    for (int j = 0; j < 8; j++) {
        float isk = (0.1f * (float)ks[j] + nmax) / mx;
        float e = qp_error(n, nmax, x, w, isk, 1.0f / isk);
        if (e < best) {
            best = e;
            iscale = isk;
        }
    }
    float slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        L[i] = qz_nearest(iscale * x[i], 0, nmax);
        float a = (w[i] * x[i]) * L[i];
        float b = w[i] * L[i] * L[i];
        slx = i ? slx + a : a;
        sl2 = i ? sl2 + b : b;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float wx = w[i] * x[i];
            float a = slx - wx * L[i];
            float b = sl2 - w[i] * L[i] * L[i];
            if (!(a > 0 && b > 0)) continue;
            float nl = qz_nearest(x[i] * b / a, 0, nmax);
            if (nl == L[i]) continue;
            float a2 = a + wx * nl;
            float b2 = b + w[i] * nl * nl;
            if (a2 * a2 * sl2 > slx * slx * b2) {
                L[i] = nl;
                slx = a2;
                sl2 = b2;
                changed++;
            }
        }
        if (!changed) break;
    }
    return sl2 > 0 ? slx / sl2 : 0;
}
