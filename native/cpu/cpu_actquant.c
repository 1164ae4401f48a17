/* Activation quantization (docs/reference/formats.md §5.2 per-32 with f32 scale, §5.4 Q8_K).
 * Built with -ffp-contract=off: each f32 operation rounds once, as numpy does. */
#include <math.h>

#include "cpu_internal.h"

/* Round half to even for |v| <= 2^22 (adding 1.5*2^23 leaves an ulp of 1). */
static inline int round_clamp_i8(float v) {
    v = fminf(fmaxf(v, -128.0f), 127.0f);
    return (int)((v + 12582912.0f) - 12582912.0f);  /* not folded: no -ffast-math */
}

#if defined(__x86_64__) || defined(__i386__)
/* Whether the bit-identical AVX-512 quantizers (cpu_actquant_avx512.c) can run here:
 * checked once, cached (0 no, 1 yes; -1 not yet known). */
static int simd_quantizers(void) {
    static int known = -1;
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        v = ds4_cpu_impl_available(DS4_CPU_IMPL_AVX512);
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

void ds4_cpu_quantize_q8a(const float *x, size_t n, ds4_block_q8a *out) {
    size_t nb = (n + 31) / 32, b = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (simd_quantizers()) {
        b = n / 32;  /* whole blocks; a partial last block takes the loop below */
        ds4_cpu_quantize_q8a_avx512(x, b, out);
    }
#endif
    for (; b < nb; b++) {
        const float *xb = x + 32 * b;
        size_t m = n - 32 * b < 32 ? n - 32 * b : 32;
        float amax = 0.0f;
        for (size_t i = 0; i < m; i++) {
            float a = fabsf(xb[i]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
        for (size_t i = 0; i < 32; i++) {
            out[b].q[i] = (int8_t)(i < m ? round_clamp_i8(xb[i] * id) : 0);
        }
    }
}

int ds4_cpu_quantize_q8k(const float *x, size_t n, ds4_block_q8k *out) {
    if (n % 256) return DS4_CPU_BAD_SHAPE;
#if defined(__x86_64__) || defined(__i386__)
    if (simd_quantizers()) {
        ds4_cpu_quantize_q8k_avx512(x, n / 256, out);
        return DS4_CPU_OK;
    }
#endif
    for (size_t b = 0; b < n / 256; b++) {
        const float *xb = x + 256 * b;
        ds4_block_q8k *y = &out[b];
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 256; j++) {
            float a = fabsf(xb[j]);
            if (a > amax) {  /* strict: the first element of maximal |x| wins */
                amax = a;
                mx = xb[j];
            }
        }
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        /* The sign flip is deliberate: the largest element maps to -127. */
        float iscale = -127.0f / mx;
        for (int j = 0; j < 256; j++) y->q[j] = (int8_t)round_clamp_i8(iscale * xb[j]);
        for (int k = 0; k < 16; k++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y->q[16 * k + j];
            y->bsums[k] = (int16_t)s;
        }
        y->d = 1.0f / iscale;
    }
    return DS4_CPU_OK;
}

int ds4_cpu_act_has_min_code(int act_kind, const void *act, size_t cols) {
#if defined(__x86_64__) || defined(__i386__)
    if (simd_quantizers()) return ds4_cpu_act_has_min_code_avx512(act_kind, act, cols);
#endif
    if (act_kind == ACT_Q8A) {
        const ds4_block_q8a *a = act;
        for (size_t b = 0; b < (cols + 31) / 32; b++)
            for (int i = 0; i < 32; i++)
                if (a[b].q[i] == -128) return 1;
    } else if (act_kind == ACT_Q8K) {
        const ds4_block_q8k *a = act;
        for (size_t b = 0; b < cols / 256; b++)
            for (int i = 0; i < 256; i++)
                if (a[b].q[i] == -128) return 1;
    }
    return 0;
}
