"""cffi builder for ds4._native_cpu (run by the package build, never at import)."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
    typedef struct { float d; int8_t q[256]; int16_t bsums[16]; } ds4_block_q8k;
    typedef struct { float d; int8_t q[32]; } ds4_block_q8a;
    typedef struct {
        const uint8_t *base; size_t expert_stride; size_t row_stride; int type;
    } ds4_cpu_experts;

    int ds4_cpu_impl_available(int impl);
    int ds4_cpu_best_impl(void);
    int ds4_cpu_set_threads(int n_threads);
    int ds4_cpu_threads(void);
    void ds4_cpu_quantize_q8a(const float *x, size_t n, ds4_block_q8a *out);
    int ds4_cpu_quantize_q8k(const float *x, size_t n, ds4_block_q8k *out);
    size_t ds4_cpu_row_bytes(int type, size_t cols);
    int ds4_cpu_matmul(int type, const uint8_t *w, size_t row_stride, size_t rows,
                       size_t cols, const float *x, size_t n_tok, float *y, int impl);
    int ds4_cpu_moe(const float *x, size_t n_embd, size_t n_ff, size_t n_expert,
                    const ds4_cpu_experts *gate, const ds4_cpu_experts *up,
                    const ds4_cpu_experts *down, const int32_t *expert_ids,
                    const float *route_weights, size_t n_used, float clamp, float *out,
                    int impl);
    uint64_t ds4_cpu_probe_macs(int kind, uint64_t iters_per_thread);
    """
)
ffibuilder.set_source(
    "ds4._native_cpu",
    '#include "ds4_cpu.h"',
    sources=[
        "native/cpu/cpu_actquant.c",
        "native/cpu/cpu_dot_scalar.c",
        "native/cpu/cpu_dot_avx2.c",
        "native/cpu/cpu_dot_neon.c",
        "native/cpu/cpu_matmul.c",
        "native/cpu/cpu_moe.c",
        "native/cpu/cpu_pool.c",
        "native/cpu/cpu_probe.c",
        "native/cpu/cpu_tables.c",
    ],
    include_dirs=["native/cpu", "native/common"],
    # No contraction and no fast-math: the scalar kernels must round exactly like the
    # numpy reference. SIMD code asks for AVX2/FMA (x86-64) or SDOT (aarch64) per function
    # (target attributes), so one build runs on any CPU of its architecture and picks the
    # kernels at run time.
    extra_compile_args=[
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-ffp-contract=off",
        "-fno-fast-math",
        "-pthread",
        "-D_GNU_SOURCE",
    ],
    extra_link_args=["-pthread"],
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
