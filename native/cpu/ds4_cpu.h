/* Native CPU kernels: activation quantization, matrix-vector / small matrix-matrix
 * products computed straight from GGUF weight blocks, and the routed-MoE step
 * (docs/reference/formats.md §5). Work is split by output row over a persistent thread pool, so
 * every result is independent of the thread count. */
#ifndef DS4_CPU_H
#define DS4_CPU_H

#include <stddef.h>
#include <stdint.h>

/* Return codes. */
enum {
    DS4_CPU_OK = 0,
    DS4_CPU_BAD_TYPE = 1,   /* weight type not supported by this entry point */
    DS4_CPU_BAD_SHAPE = 2,  /* lengths are not whole blocks or do not agree */
    DS4_CPU_BAD_IMPL = 3,   /* requested SIMD implementation not available here */
    DS4_CPU_NO_MEMORY = 4,
    DS4_CPU_BAD_EXPERT = 5  /* expert id out of range */
};

/* Kernel implementations. AUTO picks the best one this CPU supports. */
enum {
    DS4_CPU_IMPL_AUTO = 0,
    DS4_CPU_IMPL_SCALAR = 1,
    DS4_CPU_IMPL_AVX2 = 2,
    DS4_CPU_IMPL_NEON = 3,  /* aarch64; uses SDOT where the CPU reports it */
    DS4_CPU_IMPL_AVX512 = 4 /* x86-64 with AVX-512 F/BW/VL/DQ/VBMI/VNNI and GFNI; AVX2 for the rest */
};

/* Q8_K activation block (docs/reference/formats.md §4.7): 292 bytes, no padding. */
typedef struct {
    float d;
    int8_t q[256];
    int16_t bsums[16];
} ds4_block_q8k;

/* Per-32 activation block for Q8_0 weights (docs/reference/formats.md §5.2): f32 scale, not f16. */
typedef struct {
    float d;
    int8_t q[32];
} ds4_block_q8a;

int ds4_cpu_impl_available(int impl);
int ds4_cpu_best_impl(void);

/* Thread pool size (1..256); the pool is created once and reused. */
int ds4_cpu_set_threads(int n_threads);
int ds4_cpu_threads(void);
/* Microseconds idle pool workers spin before sleeping (0..10000; default 0). Spinning
 * saves the wake-up of back-to-back small products on otherwise idle cores and costs
 * time where the cores are shared. */
int ds4_cpu_set_pool_spin_us(int us);

/* Activation quantization. q8a: ceil(n/32) blocks (a partial tail is zero-padded);
 * q8k: n must be a multiple of 256. */
void ds4_cpu_quantize_q8a(const float *x, size_t n, ds4_block_q8a *out);
int ds4_cpu_quantize_q8k(const float *x, size_t n, ds4_block_q8k *out);

/* Bytes of one weight row of `cols` values; 0 if the type is unsupported or cols is
 * not a whole number of blocks. */
size_t ds4_cpu_row_bytes(int type, size_t cols);

/* y[t*rows + r] = W[r] . x[t*cols ...] for t < n_tok, r < rows. Row r of W starts at
 * w + r*row_stride. Activations are quantized as the weight type requires. */
int ds4_cpu_matmul(int type, const uint8_t *w, size_t row_stride, size_t rows, size_t cols,
                   const float *x, size_t n_tok, float *y, int impl);

/* Q2_K rows interleaved eight at a time (docs/adr/0067-q2k-row-interleaved-repack.md):
 * the same number of bytes as the GGUF rows; whole groups of 8 rows are interleaved
 * per 256-value block, the rows % 8 tail rows follow in the GGUF layout. _bytes: the
 * size (0 if cols is not a whole number of blocks). _unpack restores packed, contiguous
 * GGUF rows. _matvec: y = W x for one token over the repacked rows, on the AVX-512 set
 * only (impl AUTO or AVX512, else DS4_CPU_BAD_IMPL); each y[r] is the same bits for any
 * thread count, within the stated bound of the scalar kernel but not bit-identical to
 * the GGUF-layout row kernels. */
size_t ds4_cpu_q2k_x8_bytes(size_t rows, size_t cols);
int ds4_cpu_q2k_x8_repack(const uint8_t *w, size_t row_stride, size_t rows, size_t cols,
                          uint8_t *out);
int ds4_cpu_q2k_x8_unpack(const uint8_t *packed, size_t rows, size_t cols, uint8_t *out);
int ds4_cpu_q2k_x8_matvec(const uint8_t *packed, size_t rows, size_t cols, const float *x,
                          float *y, int impl);

/* One expert matrix set of a 3-D expert tensor: base, bytes between experts, bytes
 * between rows, type. */
typedef struct {
    const uint8_t *base;
    size_t expert_stride;
    size_t row_stride;
    int type;
    /* 1: each expert's Q2_K rows are interleaved by 8 (ds4_cpu_q2k_x8_repack, ADR 0067),
     * read by the AVX-512 group kernel only; row_stride is then the GGUF row size. */
    int x8;
} ds4_cpu_experts;

/* Routed MoE for one token (docs/reference/formats.md §5.8): x has n_embd values, gate/up have n_ff
 * rows of n_embd, down has n_embd rows of n_ff; out receives n_embd values. */
int ds4_cpu_moe(const float *x, size_t n_embd, size_t n_ff, size_t n_expert,
                const ds4_cpu_experts *gate, const ds4_cpu_experts *up,
                const ds4_cpu_experts *down, const int32_t *expert_ids,
                const float *route_weights, size_t n_used, float clamp, float *out,
                int impl);

/* Benchmark probe: register-only SIMD multiply-adds on every pool thread (kind 0:
 * int8, 1: f32); returns the count done, 0 where no SIMD probe exists. */
uint64_t ds4_cpu_probe_macs(int kind, uint64_t iters_per_thread);

#endif
