/* f32 vector primitives of the attention and the indexer: the strict sequential forms
 * (exact numerics) and AVX2/FMA or NEON forms for the fast path, where only the summation order
 * and the fused multiply-adds differ (the reference engine's fast-math build does the
 * same). */
#include "fwd_internal.h"

static float dot_seq(const float *a, const float *b, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_seq(float *acc, float w, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) acc[i] += w * x[i];
}

static const ds4_fw_vec vec_seq = {dot_seq, axpy_seq};

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static float dot_avx2(const float *a, const float *b, size_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    __m256 s = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float out = _mm_cvtss_f32(h);
    for (; i < n; i++) out += a[i] * b[i];
    return out;
}

AVX2 static void axpy_avx2(float *acc, float w, const float *x, size_t n) {
    __m256 vw = _mm256_set1_ps(w);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i),
                                                  _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * x[i];
}

static const ds4_fw_vec vec_avx2 = {dot_avx2, axpy_avx2};
#endif

#if defined(__aarch64__)
#include <arm_neon.h>

static float dot_neon(const float *a, const float *b, size_t n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    float out = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) out += a[i] * b[i];
    return out;
}

static void axpy_neon(float *acc, float w, const float *x, size_t n) {
    float32x4_t vw = vdupq_n_f32(w);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(acc + i, vfmaq_f32(vld1q_f32(acc + i), vw, vld1q_f32(x + i)));
    for (; i < n; i++) acc[i] += w * x[i];
}

static const ds4_fw_vec vec_neon = {dot_neon, axpy_neon};
#endif

const ds4_fw_vec *ds4_fw_vec_for(int impl) {
    if (impl == DS4_CPU_IMPL_AUTO) impl = ds4_cpu_best_impl();
#if defined(__x86_64__) || defined(__i386__)
    /* the AVX-512 set has no vector forms of its own: it takes AVX2's (it picked the
     * sequential ones before, which made its attention several times slower) */
    if ((impl == DS4_CPU_IMPL_AVX2 || impl == DS4_CPU_IMPL_AVX512) && ds4_cpu_impl_available(impl))
        return &vec_avx2;
#endif
#if defined(__aarch64__)
    if (impl == DS4_CPU_IMPL_NEON) return &vec_neon;
#endif
    return &vec_seq;
}
