/* Matrix-vector and small matrix-matrix products from GGUF weight blocks: prepare the
 * activations the weight type needs, then split output rows over the thread pool.
 * Each output value is one dot-kernel call on one (row, token) pair, so the result is
 * the same for any thread count and any batch the token sits in. */
#include <pthread.h>

#include "cpu_internal.h"
#include "cpu_pool.h"

int ds4_cpu_type_info(int type, int *act_kind, size_t *block_values, size_t *block_bytes) {
    switch (type) {
    case T_F32: *act_kind = ACT_F32; *block_values = 1; *block_bytes = 4; return 1;
    case T_F16: *act_kind = ACT_F32; *block_values = 1; *block_bytes = 2; return 1;
    case T_BF16: *act_kind = ACT_F32; *block_values = 1; *block_bytes = 2; return 1;
    case T_Q8_0: *act_kind = ACT_Q8A; *block_values = 32; *block_bytes = 34; return 1;
    case T_Q2_K: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 84; return 1;
    case T_Q4_K: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 144; return 1;
    case T_IQ2_XXS: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 66; return 1;
    case T_MXFP4: *act_kind = ACT_Q8A; *block_values = 32; *block_bytes = 17; return 1;
    case T_Q3_K: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 110; return 1;
    case T_Q5_K: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 176; return 1;
    case T_Q6_K: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 210; return 1;
    case T_IQ4_NL: *act_kind = ACT_Q8A; *block_values = 32; *block_bytes = 18; return 1;
    case T_IQ4_XS: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 136; return 1;
    case T_IQ2_XS: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 74; return 1;
    case T_IQ3_XXS: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 98; return 1;
    case T_IQ3_S: *act_kind = ACT_Q8K; *block_values = 256; *block_bytes = 110; return 1;
    default: return 0;
    }
}

ds4_dot_fn ds4_cpu_pick_dot(const ds4_dot_table *t, int type) {
    switch (type) {
    case T_F32: return t->f32;
    case T_F16: return t->f16;
    case T_BF16: return t->bf16;
    case T_Q8_0: return t->q8_0;
    case T_Q2_K: return t->q2_k;
    case T_Q4_K: return t->q4_k;
    case T_IQ2_XXS: return t->iq2_xxs;
    case T_MXFP4: return t->mxfp4;
    case T_Q3_K: return t->q3_k;
    case T_Q5_K: return t->q5_k;
    case T_Q6_K: return t->q6_k;
    case T_IQ4_NL: return t->iq4_nl;
    case T_IQ4_XS: return t->iq4_xs;
    case T_IQ2_XS: return t->iq2_xs;
    case T_IQ3_XXS: return t->iq3_xxs;
    case T_IQ3_S: return t->iq3_s;
    default: return NULL;
    }
}

static int have_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

/* Everything the AVX-512 kernels use: byte/word ops, the 64-byte permute (VBMI), the
 * int8 dot (VNNI) and the GF(2) affine byte map (GFNI, Q2_K code extraction). A CPU with
 * AVX-512 but without one of them keeps the AVX2 set. */
static int have_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    return have_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("gfni");
#else
    return 0;
#endif
}

int ds4_cpu_impl_available(int impl) {
    switch (impl) {
    case DS4_CPU_IMPL_AUTO:
    case DS4_CPU_IMPL_SCALAR: return 1;
    case DS4_CPU_IMPL_AVX2: return have_avx2();
    case DS4_CPU_IMPL_AVX512: return have_avx512();
#if defined(__aarch64__)
    case DS4_CPU_IMPL_NEON: return 1;  /* Advanced SIMD is mandatory on aarch64 */
#endif
    default: return 0;
    }
}

int ds4_cpu_best_impl(void) {
#if defined(__aarch64__)
    return DS4_CPU_IMPL_NEON;
#else
    if (have_avx512()) return DS4_CPU_IMPL_AVX512;
    return have_avx2() ? DS4_CPU_IMPL_AVX2 : DS4_CPU_IMPL_SCALAR;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
/* The AVX-512 set: the AVX2 row kernels with Q2_K's, IQ2_XXS's and MXFP4's replaced (Q8_0 keeps
 * the AVX2 row kernel, whose arithmetic the AVX-512 prefill tile and multi-row decode
 * kernel reproduce bit for bit; the IQ2_XXS one reproduces the AVX2 kernel's, as its
 * group tile does). */
static ds4_dot_table dots_avx512;
static pthread_once_t dots_avx512_once = PTHREAD_ONCE_INIT;

static void build_avx512_table(void) {
    dots_avx512 = ds4_dots_avx2;
    dots_avx512.q2_k = ds4_dot_avx512_q2_k();
    dots_avx512.iq2_xxs = ds4_dot_avx512_iq2_xxs();  /* same bits as AVX2's (cpu_tile_iq2.c) */
    dots_avx512.mxfp4 = ds4_dot_avx512_mxfp4();
}
#endif

const ds4_dot_table *ds4_cpu_dot_table(int impl) {
    ds4_cpu_tables_init();
    if (impl == DS4_CPU_IMPL_AUTO) impl = ds4_cpu_best_impl();
    if (!ds4_cpu_impl_available(impl)) return NULL;
#if defined(__x86_64__) || defined(__i386__)
    if (impl == DS4_CPU_IMPL_AVX2) return &ds4_dots_avx2;
    if (impl == DS4_CPU_IMPL_AVX512) {
        pthread_once(&dots_avx512_once, build_avx512_table);
        return &dots_avx512;
    }
#endif
#if defined(__aarch64__)
    if (impl == DS4_CPU_IMPL_NEON)
        return ds4_cpu_have_sdot() ? &ds4_dots_neon_sdot : &ds4_dots_neon;
#endif
    return impl == DS4_CPU_IMPL_SCALAR ? &ds4_dots_scalar : NULL;
}

ds4_rows_fn ds4_cpu_pick_rows(const ds4_dot_table *table, int type) {
#if defined(__x86_64__) || defined(__i386__)
    if (table == &dots_avx512 && type == T_Q8_0) return ds4_rows_avx512_q8_0();
    if (table == &dots_avx512 && type == T_Q2_K) return ds4_rows_avx512_q2_k();
#endif
    (void)table;
    (void)type;
    return NULL;
}

/* The prefill tile kernel of a table and weight type, or NULL where there is none. */
static ds4_tile_fn pick_tile(const ds4_dot_table *table, int type) {
#if defined(__x86_64__) || defined(__i386__)
    if (table == &dots_avx512 && type == T_Q8_0) return ds4_tile_avx512_q8_0();
    if (table == &dots_avx512 && type == T_F16) return ds4_tile_avx512_f16();
#endif
    (void)table;
    (void)type;
    return NULL;
}

ds4_group_tile_fn ds4_cpu_pick_group_tile(const ds4_dot_table *table, int type) {
#if defined(__x86_64__) || defined(__i386__)
    if (table == &dots_avx512 && type == T_IQ2_XXS) return ds4_tile_avx512_iq2_xxs();
    if (table == &ds4_dots_avx2 && type == T_IQ2_XXS) return ds4_tile_avx2_iq2_xxs();
#endif
    (void)table;
    (void)type;
    return NULL;
}

int ds4_cpu_set_threads(int n_threads) {
    return ds4_pool_set_threads(n_threads) == 0 ? DS4_CPU_OK : DS4_CPU_BAD_SHAPE;
}

int ds4_cpu_threads(void) { return ds4_pool_threads(); }

int ds4_cpu_set_pool_spin_us(int us) {
    if (us < 0 || us > 10000) return DS4_CPU_BAD_SHAPE;
    return ds4_pool_set_spin(1000L * us) == 0 ? DS4_CPU_OK : DS4_CPU_BAD_SHAPE;
}

size_t ds4_cpu_row_bytes(int type, size_t cols) {
    int kind;
    size_t bv, bb;
    if (!ds4_cpu_type_info(type, &kind, &bv, &bb) || cols == 0 || cols % bv) return 0;
    return cols / bv * bb;
}

/* Rows per tile: a tile of weight rows stays in cache while every token visits it. */
#define ROW_TILE 8
/* Multiply-adds below which a product is not worth handing to other threads. */
#define SMALL_PRODUCT (64 * 1024)

typedef struct {
    const uint8_t *w;
    size_t row_stride, rows, cols, n_tok, act_bytes;
    const uint8_t *acts;       /* n_tok prepared activations, act_bytes apart */
    const ds4_dot_fn *dots;    /* per token: SIMD kernel, or scalar for -128 codes */
    ds4_tile_fn tile;          /* rows x tokens tile kernel, or NULL */
    ds4_rows_fn rows_fn;       /* multi-row kernel for tokens whose kernel is rows_dot */
    ds4_dot_fn rows_dot;
    float *y;
    ds4_group_tile_fn group_tile;          /* rows x all tokens, or NULL */
    const ds4_block_q8k *const *offset_acts; /* its activations (codes + 128) */
} matmul_job;

/* Tokens t .. t + TILE_TOKS of rows r0 .. r1 through the tile kernel (whole tiles) and
 * the row kernels (the rows left over). */
static void matmul_tile_tokens(const matmul_job *job, size_t r0, size_t r1, size_t t) {
    const void *acts[Q8_0_TILE_TOKS];
    for (int i = 0; i < Q8_0_TILE_TOKS; i++) acts[i] = job->acts + (t + i) * job->act_bytes;
    size_t r = r0;
    for (; r + Q8_0_TILE_ROWS <= r1; r += Q8_0_TILE_ROWS)
        job->tile(job->w + r * job->row_stride, job->row_stride, acts, job->cols,
                  job->y + t * job->rows + r, job->rows);
    for (; r < r1; r++)
        for (int i = 0; i < Q8_0_TILE_TOKS; i++)
            job->y[(t + i) * job->rows + r] =
                job->dots[t + i](job->w + r * job->row_stride, acts[i], job->cols);
}

static void matmul_rows(void *ctx, size_t begin, size_t end) {
    const matmul_job *job = ctx;
    for (size_t r0 = begin; r0 < end; r0 += ROW_TILE) {
        size_t r1 = r0 + ROW_TILE < end ? r0 + ROW_TILE : end;
        if (job->group_tile) {
            job->group_tile(job->w + r0 * job->row_stride, job->row_stride, r1 - r0,
                            job->offset_acts, job->n_tok, job->cols, job->y + r0, job->rows);
            continue;
        }
        size_t t0 = 0;
        if (job->tile)
            for (; t0 + Q8_0_TILE_TOKS <= job->n_tok; t0 += Q8_0_TILE_TOKS)
                matmul_tile_tokens(job, r0, r1, t0);
        for (size_t t = t0; t < job->n_tok; t++) {
            const void *act = job->acts + t * job->act_bytes;
            float *yt = job->y + t * job->rows;
            if (job->rows_fn && job->dots[t] == job->rows_dot) {
                job->rows_fn(job->w + r0 * job->row_stride, job->row_stride, r1 - r0, act,
                             job->cols, yt + r0);
                continue;
            }
            for (size_t r = r0; r < r1; r++)
                yt[r] = job->dots[t](job->w + r * job->row_stride, act, job->cols);
        }
    }
}

/* Size in bytes of one prepared activation of `cols` values. */
static size_t act_size(int kind, size_t cols) {
    if (kind == ACT_Q8A) return (cols + 31) / 32 * sizeof(ds4_block_q8a);
    if (kind == ACT_Q8K) return cols / 256 * sizeof(ds4_block_q8k);
    return cols * sizeof(float);
}

static void prepare_act(int kind, const float *x, size_t cols, void *out) {
    if (kind == ACT_Q8A) ds4_cpu_quantize_q8a(x, cols, out);
    else if (kind == ACT_Q8K) ds4_cpu_quantize_q8k(x, cols, out);
}

int ds4_cpu_matmul(int type, const uint8_t *w, size_t row_stride, size_t rows, size_t cols,
                   const float *x, size_t n_tok, float *y, int impl) {
    int kind;
    size_t bv, bb;
    if (!ds4_cpu_type_info(type, &kind, &bv, &bb)) return DS4_CPU_BAD_TYPE;
    if (cols == 0 || cols % bv || row_stride < cols / bv * bb) return DS4_CPU_BAD_SHAPE;
    const ds4_dot_table *table = ds4_cpu_dot_table(impl);
    if (!table) return DS4_CPU_BAD_IMPL;
    if (rows == 0 || n_tok == 0) return DS4_CPU_OK;

    size_t act_bytes = act_size(kind, cols);
    size_t mark = ds4_scratch_mark();
    uint8_t *acts = NULL;
    ds4_dot_fn *dots = ds4_scratch_alloc(n_tok * sizeof *dots);
    if (kind != ACT_F32) acts = ds4_scratch_alloc(n_tok * act_bytes);
    if (!dots || (kind != ACT_F32 && !acts)) {
        ds4_scratch_reset(mark);
        return DS4_CPU_NO_MEMORY;
    }
    int any_exact = 0;
    for (size_t t = 0; t < n_tok; t++) {
        if (kind != ACT_F32) prepare_act(kind, x + t * cols, cols, acts + t * act_bytes);
        int exact = kind != ACT_F32 && ds4_cpu_act_has_min_code(kind, acts + t * act_bytes, cols);
        any_exact |= exact;
        dots[t] = ds4_cpu_pick_dot(exact ? &ds4_dots_scalar : table, type);
    }
    /* the tile serves batches whose tokens all take the table's row kernel */
    ds4_tile_fn tile = any_exact || n_tok < Q8_0_TILE_TOKS ? NULL : pick_tile(table, type);
    matmul_job job = {w, row_stride, rows, cols, n_tok, act_bytes,
                      kind == ACT_F32 ? (const uint8_t *)x : acts, dots, tile,
                      ds4_cpu_pick_rows(table, type), ds4_cpu_pick_dot(table, type), y, NULL,
                      NULL};
    /* a group tile shares each decoded weight block among the tokens: from 2 tokens */
    ds4_group_tile_fn group_tile = any_exact || n_tok < 2 ? NULL : ds4_cpu_pick_group_tile(table, type);
    if (group_tile) {
        size_t nb = cols / 256;
        ds4_block_q8k *off = ds4_scratch_alloc(n_tok * nb * sizeof *off);
        const ds4_block_q8k **ptrs = ds4_scratch_alloc(n_tok * sizeof *ptrs);
        if (!off || !ptrs) {
            ds4_scratch_reset(mark);
            return DS4_CPU_NO_MEMORY;
        }
        for (size_t t = 0; t < n_tok; t++) {
            ds4_cpu_q8k_offset((const ds4_block_q8k *)(const void *)(acts + t * act_bytes), nb,
                               off + t * nb);
            ptrs[t] = off + t * nb;
        }
        job.group_tile = group_tile;
        job.offset_acts = ptrs;
    }
    /* Small chunks balance the load; a multiple of the tile keeps tiles whole. A small
     * product runs on the calling thread: waking the pool would cost more. */
    size_t grain = ROW_TILE * (n_tok > 1 ? 1 : 4);
    if (rows * cols * n_tok < SMALL_PRODUCT) grain = rows;
    ds4_pool_run(matmul_rows, &job, rows, grain);
    ds4_scratch_reset(mark);
    return DS4_CPU_OK;
}
