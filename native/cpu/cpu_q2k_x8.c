/* Q2_K rows interleaved eight at a time (docs/adr/0067-q2k-row-interleaved-repack.md):
 * the repack from GGUF rows (and back, for tests), and a one-token product over the
 * repacked bytes. Whole groups of 8 rows run the AVX-512 group kernel
 * (cpu_q2k_x8_avx512.c); the m % 8 tail rows stay in the GGUF layout after the groups and
 * run the row kernel of the same set. */
#include "cpu_internal.h"
#include "cpu_pool.h"

enum { X8 = DS4_Q2K_X8_ROWS, BLOCK = 84, GROUP_BLOCK = 8 * 84 };

/* The 2-bit code of value v (0..255) of a GGUF Q2_K block (docs/reference/formats.md). */
static inline unsigned gguf_code(const uint8_t *blk, unsigned v) {
    return (blk[16 + 32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3u;
}

/* One block of 8 rows (blk[r] = row r's GGUF block) into the interleaved 672 bytes. */
static void pack_block(const uint8_t *const blk[X8], uint8_t *out) {
    for (int r = 0; r < X8; r++) {
        memcpy(out + 2 * r, blk[r] + 80, 2);       /* dall of row r */
        memcpy(out + 16 + 2 * r, blk[r] + 82, 2);  /* dmin of row r */
    }
    for (int p = 0; p < 8; p++)
        for (int j = 0; j < 16; j++) out[32 + 16 * p + j] = blk[j % 8][2 * p + j / 8];
    for (int p = 0; p < 8; p++)
        for (int b = 0; b < 64; b++) {
            unsigned byte = 0, row = (b / 4) % 8, sub = 2 * p + b / 32;
            for (unsigned f = 0; f < 4; f++)
                byte |= gguf_code(blk[row], 16 * sub + 4 * f + b % 4) << (2 * f);
            out[160 + 64 * p + b] = (uint8_t)byte;
        }
}

static void unpack_block(const uint8_t *in, uint8_t *const blk[X8]) {
    for (int r = 0; r < X8; r++) {
        memcpy(blk[r] + 80, in + 2 * r, 2);
        memcpy(blk[r] + 82, in + 16 + 2 * r, 2);
        memset(blk[r] + 16, 0, 64);
    }
    for (int p = 0; p < 8; p++)
        for (int j = 0; j < 16; j++) blk[j % 8][2 * p + j / 8] = in[32 + 16 * p + j];
    for (int p = 0; p < 8; p++)
        for (int b = 0; b < 64; b++) {
            unsigned row = (b / 4) % 8, sub = 2 * p + b / 32;
            for (unsigned f = 0; f < 4; f++) {
                unsigned v = 16 * sub + 4 * f + b % 4;
                unsigned code = (in[160 + 64 * p + b] >> (2 * f)) & 3u;
                blk[row][16 + 32 * (v / 128) + v % 32] |= (uint8_t)(code << (2 * ((v % 128) / 32)));
            }
        }
}

size_t ds4_cpu_q2k_x8_bytes(size_t rows, size_t cols) {
    if (cols == 0 || cols % 256) return 0;
    return rows * (cols / 256) * BLOCK;
}

int ds4_cpu_q2k_x8_repack(const uint8_t *w, size_t row_stride, size_t rows, size_t cols,
                          uint8_t *out) {
    size_t nb = cols / 256, row_bytes = ds4_cpu_q2k_x8_bytes(1, cols);
    if (!row_bytes || row_stride < row_bytes) return DS4_CPU_BAD_SHAPE;
    size_t groups = rows / X8;
    for (size_t g = 0; g < groups; g++)
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk[X8];
            for (int r = 0; r < X8; r++) blk[r] = w + (X8 * g + r) * row_stride + BLOCK * b;
            pack_block(blk, out + (g * nb + b) * GROUP_BLOCK);
        }
    for (size_t r = groups * X8; r < rows; r++)
        memcpy(out + r * row_bytes, w + r * row_stride, row_bytes);
    return DS4_CPU_OK;
}

int ds4_cpu_q2k_x8_unpack(const uint8_t *packed, size_t rows, size_t cols, uint8_t *out) {
    size_t nb = cols / 256, row_bytes = ds4_cpu_q2k_x8_bytes(1, cols);
    if (!row_bytes) return DS4_CPU_BAD_SHAPE;
    size_t groups = rows / X8;
    for (size_t g = 0; g < groups; g++)
        for (size_t b = 0; b < nb; b++) {
            uint8_t *blk[X8];
            for (int r = 0; r < X8; r++) blk[r] = out + (X8 * g + r) * row_bytes + BLOCK * b;
            unpack_block(packed + (g * nb + b) * GROUP_BLOCK, blk);
        }
    for (size_t r = groups * X8; r < rows; r++)
        memcpy(out + r * row_bytes, packed + r * row_bytes, row_bytes);
    return DS4_CPU_OK;
}

#if defined(__x86_64__) || defined(__i386__)
typedef struct {
    const uint8_t *packed;
    size_t nb, groups, rows, row_bytes, cols;
    const void *xs;          /* the group kernel's activation (ds4_q2k_x8_act_avx512) */
    const ds4_block_q8k *xq; /* the Q8_K activation, for the tail rows */
    ds4_dot_fn tail_dot;
    float *y;
} x8_job;

void ds4_q2k_x8_items(const uint8_t *packed, size_t rows, size_t cols, const void *xs,
                      const ds4_block_q8k *xq, ds4_dot_fn tail_dot, size_t begin, size_t end,
                      float *y) {
    size_t nb = cols / 256, groups = rows / X8, row_bytes = nb * BLOCK;
    size_t first = begin < groups ? X8 * begin : X8 * groups + (begin - groups);
    size_t g1 = end < groups ? end : groups;
    if (begin < g1)
        ds4_q2k_x8_groups_avx512(packed + begin * nb * GROUP_BLOCK, g1 - begin, xs, nb, y);
    for (size_t i = begin > groups ? begin : groups; i < end; i++) {
        size_t r = X8 * groups + (i - groups);
        y[r - first] = tail_dot(packed + r * row_bytes, xq, cols);
    }
}

/* Items are groups, then the tail rows (one item each). */
static void x8_items(void *ctx, size_t begin, size_t end) {
    const x8_job *job = ctx;
    size_t first = begin < job->groups ? X8 * begin : X8 * job->groups + (begin - job->groups);
    ds4_q2k_x8_items(job->packed, job->rows, job->cols, job->xs, job->xq, job->tail_dot, begin,
                     end, job->y + first);
}
#endif

int ds4_cpu_q2k_x8_matvec(const uint8_t *packed, size_t rows, size_t cols, const float *x,
                          float *y, int impl) {
    if (!ds4_cpu_q2k_x8_bytes(1, cols)) return DS4_CPU_BAD_SHAPE;
    if (impl == DS4_CPU_IMPL_AUTO) impl = ds4_cpu_best_impl();
    if (impl != DS4_CPU_IMPL_AVX512 || !ds4_cpu_impl_available(impl)) return DS4_CPU_BAD_IMPL;
#if defined(__x86_64__) || defined(__i386__)
    if (rows == 0) return DS4_CPU_OK;
    size_t nb = cols / 256, mark = ds4_scratch_mark();
    ds4_block_q8k *xq = ds4_scratch_alloc(nb * sizeof *xq);
    void *xs = ds4_scratch_alloc(nb * DS4_Q2K_X8_ACT_BYTES);
    if (!xq || !xs) {
        ds4_scratch_reset(mark);
        return DS4_CPU_NO_MEMORY;
    }
    ds4_cpu_quantize_q8k(x, cols, xq);
    ds4_q2k_x8_act_avx512(xq, nb, xs);
    /* the group kernel takes -128 codes exactly; the tail rows' row kernel does not */
    const ds4_dot_table *table = ds4_cpu_act_has_min_code(ACT_Q8K, xq, cols)
                                     ? &ds4_dots_scalar
                                     : ds4_cpu_dot_table(DS4_CPU_IMPL_AVX512);
    size_t groups = rows / X8;
    x8_job job = {packed, nb, groups, rows, nb * BLOCK, cols, xs, xq, table->q2_k, y};
    size_t items = groups + rows % X8;
    /* as ds4_cpu_matmul: a small product stays on the calling thread */
    size_t grain = rows * cols < 64 * 1024 ? items : 4;
    ds4_pool_run(x8_items, &job, items, grain);
    ds4_scratch_reset(mark);
    return DS4_CPU_OK;
#else
    (void)packed; (void)rows; (void)x; (void)y;
    return DS4_CPU_BAD_IMPL;
#endif
}
