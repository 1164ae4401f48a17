/* Peak-throughput probes for the benchmarks: register-only int8 and f32 multiply-add
 * loops on every pool thread, so kernel speed can be printed as a fraction of what
 * this machine's SIMD units can do. Returns the multiply-adds performed. */
#include "cpu_internal.h"
#include "cpu_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* Eight independent accumulators in named registers (an array may live in memory). */
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* Six chains of vpmaddubsw -> vpmaddwd -> vpaddd (the shape of the Q8 kernels), each
 * feeding its product back as the next step's bytes so nothing can be shared or hoisted:
 * 32 int8 MACs per chain step. */
#define CHAINS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
AVX2 static uint64_t int8_loop(uint64_t iters) {
    __m256i b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
#define DECL(k) __m256i t##k = _mm256_set1_epi8(k + 1), acc##k = _mm256_setzero_si256();
#define STEP(k)                                  \
    t##k = _mm256_maddubs_epi16(t##k, b);        \
    acc##k = _mm256_add_epi32(acc##k, _mm256_madd_epi16(t##k, one));
    CHAINS6(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS6(STEP)
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(acc0, acc1), acc2),
                                 _mm256_add_epi32(_mm256_add_epi32(acc3, acc4), acc5));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(t0, t1), t2));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(t3, t4), t5));
#undef DECL
#undef STEP
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    return iters * 6 * 32;
}

/* Six independent AVX-512 VNNI chains: 64 int8 MACs per instruction (the AVX-512 set's
 * int8 dot). */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static uint64_t int8_loop_vnni(
    uint64_t iters) {
    __m512i b = _mm512_set1_epi8(-2);
#define DECL(k) __m512i t##k = _mm512_set1_epi8(k + 1), acc##k = _mm512_setzero_si512();
#define STEP(k) acc##k = _mm512_dpbusd_epi32(acc##k, t##k, b);
    CHAINS6(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS6(STEP)
        __asm__ volatile("" : "+v"(b));
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(acc0, acc1), acc2),
                                 _mm512_add_epi32(_mm512_add_epi32(acc3, acc4), acc5));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(t0, t1), t2));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(t3, t4), t5));
#undef DECL
#undef STEP
    volatile int sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
    (void)sink;
    return iters * 6 * 64;
}

/* Eight independent FMA chains: 8 f32 MACs per instruction. */
AVX2 static uint64_t f32_loop(uint64_t iters) {
    __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
#define DECL(k) __m256 acc##k = _mm256_set1_ps((float)k);
#define STEP(k) acc##k = _mm256_fmadd_ps(acc##k, a, b);
    CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS(STEP)
        __asm__ volatile("" : "+x"(a), "+x"(b));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)),
                             _mm256_add_ps(_mm256_add_ps(acc4, acc5), _mm256_add_ps(acc6, acc7)));
#undef DECL
#undef STEP
    volatile float sink = _mm256_cvtss_f32(s);
    (void)sink;
    return iters * 8 * 8;
}
#endif

#if defined(__aarch64__)
#include <arm_neon.h>

#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* Eight chains of smull/smull2 -> sadalp (the baseline Q8 kernel shape): 16 int8 MACs
 * per chain step. The empty asm makes b opaque, so no product can be hoisted. */
static uint64_t int8_loop(uint64_t iters) {
    int8x16_t b = vdupq_n_s8(-2);
#define DECL(k) int8x16_t t##k = vdupq_n_s8(k + 1); int32x4_t acc##k = vdupq_n_s32(0);
#define STEP(k)                                                              \
    acc##k = vpadalq_s16(acc##k, vmull_s8(vget_low_s8(t##k), vget_low_s8(b))); \
    acc##k = vpadalq_s16(acc##k, vmull_high_s8(t##k, b));
    CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS(STEP)
        __asm__ volatile("" : "+w"(b));
    }
    int32x4_t s = vaddq_s32(vaddq_s32(vaddq_s32(acc0, acc1), vaddq_s32(acc2, acc3)),
                            vaddq_s32(vaddq_s32(acc4, acc5), vaddq_s32(acc6, acc7)));
#undef DECL
#undef STEP
    volatile int sink = vaddvq_s32(s);
    (void)sink;
    return iters * 8 * 16;
}

/* Eight SDOT chains: 16 int8 MACs per instruction. */
DS4_SDOT static uint64_t int8_loop_sdot(uint64_t iters) {
    int8x16_t b = vdupq_n_s8(-2);
#define DECL(k) int8x16_t t##k = vdupq_n_s8(k + 1); int32x4_t acc##k = vdupq_n_s32(0);
#define STEP(k) acc##k = vdotq_s32(acc##k, t##k, b);
    CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS(STEP)
        __asm__ volatile("" : "+w"(b));
    }
    int32x4_t s = vaddq_s32(vaddq_s32(vaddq_s32(acc0, acc1), vaddq_s32(acc2, acc3)),
                            vaddq_s32(vaddq_s32(acc4, acc5), vaddq_s32(acc6, acc7)));
#undef DECL
#undef STEP
    volatile int sink = vaddvq_s32(s);
    (void)sink;
    return iters * 8 * 16;
}

/* Eight independent FMA chains: 4 f32 MACs per instruction. */
static uint64_t f32_loop(uint64_t iters) {
    float32x4_t a = vdupq_n_f32(0.999f), b = vdupq_n_f32(1e-3f);
#define DECL(k) float32x4_t acc##k = vdupq_n_f32((float)k);
#define STEP(k) acc##k = vfmaq_f32(b, acc##k, a);
    CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        CHAINS(STEP)
        __asm__ volatile("" : "+w"(a), "+w"(b));
    }
    float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)),
                              vaddq_f32(vaddq_f32(acc4, acc5), vaddq_f32(acc6, acc7)));
#undef DECL
#undef STEP
    volatile float sink = vaddvq_f32(s);
    (void)sink;
    return iters * 8 * 4;
}
#endif

typedef struct {
    int kind;
    uint64_t iters;
} probe_job;

static void probe_rows(void *ctx, size_t begin, size_t end) {
    const probe_job *job = ctx;
    for (size_t i = begin; i < end; i++) {
#if defined(__x86_64__) || defined(__i386__)
        if (job->kind == 0 && ds4_cpu_best_impl() == DS4_CPU_IMPL_AVX512)
            int8_loop_vnni(job->iters);
        else if (job->kind == 0) int8_loop(job->iters);
        else f32_loop(job->iters);
#elif defined(__aarch64__)
        if (job->kind == 0 && ds4_cpu_have_sdot()) int8_loop_sdot(job->iters);
        else if (job->kind == 0) int8_loop(job->iters);
        else f32_loop(job->iters);
#else
        (void)job;
#endif
    }
}

/* kind 0: int8 MACs, 1: f32 MACs; one chunk per thread. Returns MACs done (0 if
 * there is no SIMD probe for this CPU). */
uint64_t ds4_cpu_probe_macs(int kind, uint64_t iters_per_thread) {
    uint64_t per_iter;
    if (ds4_cpu_best_impl() == DS4_CPU_IMPL_AVX512) per_iter = kind == 0 ? 6 * 64 : 8 * 8;
    else if (ds4_cpu_best_impl() == DS4_CPU_IMPL_AVX2) per_iter = kind == 0 ? 6 * 32 : 8 * 8;
    else if (ds4_cpu_best_impl() == DS4_CPU_IMPL_NEON) per_iter = kind == 0 ? 8 * 16 : 8 * 4;
    else return 0;
    int n = ds4_pool_threads();
    probe_job job = {kind, iters_per_thread};
    ds4_pool_run(probe_rows, &job, (size_t)n, 1);
    return (uint64_t)n * iters_per_thread * per_iter;
}
