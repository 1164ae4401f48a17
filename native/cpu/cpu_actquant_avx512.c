/* AVX-512 activation quantizers, bit-identical to the scalar ones in cpu_actquant.c:
 * every f32 operation is the same IEEE operation on the same operands (the per-block
 * maximum is exact in any order), so the codes, scales and bsums equal scalar's for
 * every input, NaN and infinities included. cpu_actquant.c calls them for whole blocks
 * where the CPU has the AVX-512 set; a decode product's quantization was a fixed cost
 * of about 10 us per 4096 values in scalar. The -128 code scan is here too. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_internal.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

/* |x| of 16 lanes (clears the sign bit, as fabsf). */
AVX512 static inline __m512 abs16(__m512 v) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}

/* round_clamp_i8 of cpu_actquant.c on 16 lanes: max(v, -128) returns -128 for a NaN v
 * (the second operand), as fmaxf does; then min with 127, then the 1.5 * 2^23 rounding
 * add and subtract (separate operations: no contraction), then the exact integer. */
AVX512 static inline __m512i round_clamp16(__m512 v) {
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    v = _mm512_sub_ps(_mm512_add_ps(v, magic), magic);
    return _mm512_cvttps_epi32(v);
}

/* Largest lane of 16 non-negative, non-NaN values (exact: max does not round). */
AVX512 static inline float max16(__m512 v) {
    __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* Whole Q8_0-activation blocks (32 values each). */
AVX512 void ds4_cpu_quantize_q8a_avx512(const float *x, size_t nb, ds4_block_q8a *out) {
    for (size_t b = 0; b < nb; b++, x += 32) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        /* max_ps(a, m) keeps m where a is NaN: the scalar loop's `a > amax` skips NaN */
        __m512 m = _mm512_max_ps(abs16(v0), _mm512_setzero_ps());
        m = _mm512_max_ps(abs16(v1), m);
        float amax = max16(m);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = d;
        __m512 idv = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)(void *)out[b].q,
                         _mm512_cvtepi32_epi8(round_clamp16(_mm512_mul_ps(v0, idv))));
        _mm_storeu_si128((__m128i *)(void *)(out[b].q + 16),
                         _mm512_cvtepi32_epi8(round_clamp16(_mm512_mul_ps(v1, idv))));
    }
}

/* Whole Q8_K blocks (256 values each). */
AVX512 void ds4_cpu_quantize_q8k_avx512(const float *x, size_t nb, ds4_block_q8k *out) {
    for (size_t b = 0; b < nb; b++, x += 256) {
        ds4_block_q8k *y = &out[b];
        __m512 m = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) m = _mm512_max_ps(abs16(_mm512_loadu_ps(x + 16 * k)), m);
        float amax = max16(m);
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        /* the first element of maximal |x| (NaN never compares equal) */
        float mx = 0.0f;
        __m512 am = _mm512_set1_ps(amax);
        for (int k = 0; k < 16; k++) {
            __mmask16 hit = _mm512_cmp_ps_mask(abs16(_mm512_loadu_ps(x + 16 * k)), am, _CMP_EQ_OQ);
            if (hit) {
                mx = x[16 * k + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / mx;
        __m512 is = _mm512_set1_ps(iscale);
        for (int k = 0; k < 16; k++) {
            __m512i q = round_clamp16(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * k)));
            _mm_storeu_si128((__m128i *)(void *)(y->q + 16 * k), _mm512_cvtepi32_epi8(q));
            y->bsums[k] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y->d = 1.0f / iscale;
    }
}

/* ds4_cpu_act_has_min_code on whole 32- or 256-code blocks, 32 codes per compare. */
AVX512 int ds4_cpu_act_has_min_code_avx512(int act_kind, const void *act, size_t cols) {
    const __m256i min = _mm256_set1_epi8(-128);
    if (act_kind == ACT_Q8A) {
        const ds4_block_q8a *a = act;
        for (size_t b = 0; b < (cols + 31) / 32; b++)
            if (_mm256_cmpeq_epi8_mask(_mm256_loadu_si256((const __m256i *)(const void *)a[b].q), min))
                return 1;
    } else if (act_kind == ACT_Q8K) {
        const ds4_block_q8k *a = act;
        for (size_t b = 0; b < cols / 256; b++) {
            __mmask32 hit = 0;
            for (int k = 0; k < 8; k++)
                hit |= _mm256_cmpeq_epi8_mask(
                    _mm256_loadu_si256((const __m256i *)(const void *)(a[b].q + 32 * k)), min);
            if (hit) return 1;
        }
    }
    return 0;
}

#endif
