/* Shared internals of the CPU kernels: block geometry, scalar converters, IQ2_XXS
 * tables and the per-implementation table of dot-product kernels. */
#ifndef DS4_CPU_INTERNAL_H
#define DS4_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ds4_cpu.h"

enum {
    T_F32 = 0, T_F16 = 1, T_Q8_0 = 8, T_Q2_K = 10, T_Q4_K = 12, T_IQ2_XXS = 16, T_BF16 = 30,
    T_MXFP4 = 39, T_Q3_K = 11, T_Q5_K = 13, T_Q6_K = 14,
    T_IQ4_NL = 20, T_IQ4_XS = 23,
    T_IQ2_XS = 17, T_IQ3_XXS = 18, T_IQ3_S = 21
};

/* How the activation is prepared for a weight type. */
enum { ACT_F32 = 0, ACT_Q8A = 1, ACT_Q8K = 2 };

static inline uint16_t rd_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);  /* little-endian hosts only (x86-64, aarch64) */
    return v;
}

/* Exact binary16 -> binary32 (subnormals, inf, NaN payload kept). */
static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        int e = 113;  /* normalise the subnormal: value = man * 2^-24 */
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        bits = sign | ((uint32_t)e << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* MXFP4 (docs/reference/formats.md §4.8, §5.10): the doubled E2M1 value of each 4-bit
 * code, and the block scale 2^(e - 128) its E8M0 byte stands for (bytes 0 and 1 are the
 * subnormals 2^-128 and 2^-127). */
static const int8_t ds4_mxfp4_kvalues[16] __attribute__((aligned(16))) = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static inline float e8m0_half_to_f32(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* IQ2_XXS tables built once from native/common/ds4_iq2xxs_levels.h:
 * grid[idx] = 8 unsigned bytes {8,25,43}, ksigns[s] = s | parity<<7,
 * sign_mask[s] = 8 bytes of 0x01 / 0xff (+1 / -1) for the same signs. */
extern uint64_t ds4_iq2_grid[256];
extern uint8_t ds4_iq2_ksigns[128];
extern uint64_t ds4_iq2_sign_mask[128];
void ds4_cpu_tables_init(void);

/* Q4_K packed 6-bit (scale, min) of sub-block j (docs/reference/formats.md §4.5). */
static inline void q4k_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q3_K sub-block k's signed 6-bit scale (-32..31) from the 12 packed bytes
 * (docs/reference/formats.md §4.14). */
static inline int q3k_scale(const uint8_t *sc, int k) {
    int lo = k < 8 ? (sc[k] & 15) : (sc[k - 8] >> 4);
    int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Q2_K rows interleaved by 8 (cpu_q2k_x8.c): rows per group, bytes of the group
 * kernel's prepared activation per 256-value block. */
enum { DS4_Q2K_X8_ROWS = 8, DS4_Q2K_X8_ACT_BYTES = 41 * 64 };
/* 1 where impl (AUTO resolved) is the AVX-512 set, the one that reads repacked rows. */
static inline int ds4_cpu_x8_impl(int impl) {
    if (impl == DS4_CPU_IMPL_AUTO) impl = ds4_cpu_best_impl();
    return impl == DS4_CPU_IMPL_AVX512 && ds4_cpu_impl_available(impl);
}
/* The item holding row r, for r a multiple of 8 up to the last group's end, or a tail row
 * (or rows: the end). */
static inline size_t ds4_q2k_x8_item_of(size_t rows, size_t r) {
    size_t full = rows / DS4_Q2K_X8_ROWS * DS4_Q2K_X8_ROWS;
    return r <= full ? r / DS4_Q2K_X8_ROWS : full / DS4_Q2K_X8_ROWS + (r - full);
}

/* One dot kernel: weight row w (cols values) with a prepared activation. */
typedef float (*ds4_dot_fn)(const uint8_t *w, const void *act, size_t cols);

/* A prefill tile: TILE_ROWS rows (row_stride apart) times TILE_TOKS prepared
 * activations; y[t * y_stride + r] receives row r . token t, bit-identical to the row
 * kernel of the same table. */
enum { Q8_0_TILE_ROWS = 4, Q8_0_TILE_TOKS = 4 };
typedef void (*ds4_tile_fn)(const uint8_t *w, size_t row_stride, const void *const *acts,
                            size_t cols, float *y, size_t y_stride);

/* A group tile: `rows` weight rows (row_stride apart) times n_tok tokens, any counts;
 * acts are the tokens' Q8_K blocks with codes offset by 128 (ds4_cpu_q8k_offset), and
 * y[t * y_stride + r] receives row r . token t, bit-identical to the row kernel of the
 * same table. */
typedef void (*ds4_group_tile_fn)(const uint8_t *w, size_t row_stride, size_t rows,
                                  const ds4_block_q8k *const *acts, size_t n_tok, size_t cols,
                                  float *y, size_t y_stride);

/* out = x with every code stored as u8 code + 128 (scale and bsums kept). */
void ds4_cpu_q8k_offset(const ds4_block_q8k *x, size_t n_blocks, ds4_block_q8k *out);

/* A decode kernel over several rows: rows 0 .. n_rows - 1 (row_stride apart) times one
 * prepared activation; y[r] is bit-identical to the row kernel of the same table. */
typedef void (*ds4_rows_fn)(const uint8_t *w, size_t row_stride, size_t n_rows,
                            const void *act, size_t cols, float *y);

typedef struct {
    ds4_dot_fn f32, f16, bf16, q8_0, q2_k, q4_k, iq2_xxs, mxfp4, q3_k, q5_k, q6_k, iq4_nl,
        iq4_xs, iq2_xs, iq3_xxs, iq3_s;
} ds4_dot_table;

/* IQ4_NL . Q8_0 and IQ4_XS . Q8_K (cpu_dot_iquant_*.c; docs/reference/formats.md §5.11):
 * the scalar reference and the AVX2 kernels (AVX-512 uses AVX2's). */
float ds4_dot_scalar_iq4_nl(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_scalar_iq4_xs(const uint8_t *w, const void *act, size_t cols);
/* IQ2_XS, IQ3_XXS, IQ3_S . Q8_K (§5.12): the scalar reference, and the AVX2 kernels. */
float ds4_dot_scalar_iq2_xs(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_scalar_iq3_xxs(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_scalar_iq3_s(const uint8_t *w, const void *act, size_t cols);
#if defined(__x86_64__) || defined(__i386__)
float ds4_dot_avx2_iq4_nl(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_avx2_iq4_xs(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_avx2_iq2_xs(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_avx2_iq3_xxs(const uint8_t *w, const void *act, size_t cols);
float ds4_dot_avx2_iq3_s(const uint8_t *w, const void *act, size_t cols);
#endif

extern const ds4_dot_table ds4_dots_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const ds4_dot_table ds4_dots_avx2;
/* AVX-512 VNNI kernels (cpu_dot_avx512.c); call only where ds4_cpu_have_avx512(). */
ds4_dot_fn ds4_dot_avx512_q2_k(void);
ds4_dot_fn ds4_dot_avx512_mxfp4(void);
ds4_tile_fn ds4_tile_avx512_q8_0(void);
ds4_group_tile_fn ds4_tile_avx512_iq2_xxs(void);  /* cpu_tile_iq2.c */
ds4_dot_fn ds4_dot_avx512_iq2_xxs(void);          /* cpu_tile_iq2.c */
ds4_group_tile_fn ds4_tile_avx2_iq2_xxs(void);    /* cpu_tile_iq2.c, AVX2 + FMA */
ds4_tile_fn ds4_tile_avx512_f16(void);            /* cpu_tile_f16.c */
ds4_rows_fn ds4_rows_avx512_q2_k(void);
ds4_rows_fn ds4_rows_avx512_q8_0(void);
/* Q2_K rows interleaved by 8 (cpu_q2k_x8.c, ADR 0067): the group kernel's activation
 * (per block: 32 step vectors, 8 bsum vectors, the scale; 64-byte aligned) built once
 * per product, and the kernel over `groups` consecutive groups of repacked blocks. */
void ds4_q2k_x8_act_avx512(const ds4_block_q8k *xq, size_t nb, void *out);
void ds4_q2k_x8_groups_avx512(const uint8_t *packed, size_t groups, const void *xs, size_t nb,
                              float *y);
/* Items begin .. end of a product over repacked rows (items: the rows / 8 groups, then
 * the rows % 8 tail rows one each), y[0] receiving the first row of item `begin`: the
 * groups through the group kernel (xs), the tail rows through tail_dot (xq). The one
 * code path of every product over a repacked tensor, so a row's bits do not depend on
 * the caller (decode, prefill, thread split). */
void ds4_q2k_x8_items(const uint8_t *packed, size_t rows, size_t cols, const void *xs,
                      const ds4_block_q8k *xq, ds4_dot_fn tail_dot, size_t begin, size_t end,
                      float *y);

/* Bit-identical AVX-512 activation quantizers for whole blocks (cpu_actquant_avx512.c). */
void ds4_cpu_quantize_q8a_avx512(const float *x, size_t n_blocks, ds4_block_q8a *out);
void ds4_cpu_quantize_q8k_avx512(const float *x, size_t n_blocks, ds4_block_q8k *out);
int ds4_cpu_act_has_min_code_avx512(int act_kind, const void *act, size_t cols);
#endif
#if defined(__aarch64__)
extern const ds4_dot_table ds4_dots_neon;       /* baseline ARMv8 NEON */
extern const ds4_dot_table ds4_dots_neon_sdot;  /* ARMv8.2 SDOT int8 sums */
int ds4_cpu_have_sdot(void);                    /* run-time check (Linux HWCAP) */
/* Function attribute enabling SDOT in one function (call it only if have_sdot). */
#if defined(__clang__)
#define DS4_SDOT __attribute__((target("dotprod")))
#else
#define DS4_SDOT __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#endif

/* Kernel table for an implementation id (AUTO resolved); NULL if unavailable. */
const ds4_dot_table *ds4_cpu_dot_table(int impl);
ds4_dot_fn ds4_cpu_pick_dot(const ds4_dot_table *table, int type);
/* The group tile of a table and weight type, or NULL where there is none. */
ds4_group_tile_fn ds4_cpu_pick_group_tile(const ds4_dot_table *table, int type);

/* The table's multi-row decode kernel for a type, or NULL (then call the row kernel). */
ds4_rows_fn ds4_cpu_pick_rows(const ds4_dot_table *table, int type);

/* Activation kind, block geometry (values, bytes) of a supported weight type. */
int ds4_cpu_type_info(int type, int *act_kind, size_t *block_values, size_t *block_bytes);

/* True if any code is -128: the SIMD sign tricks assume codes in [-127, 127], which
 * the quantizers guarantee except in degenerate (sub-1e-37 magnitude) blocks. */
int ds4_cpu_act_has_min_code(int act_kind, const void *act, size_t cols);

/* The calling thread's scratch arena (cpu_scratch.c, ds4_scratch.h), used as a stack:
 * take a mark, allocate (64-byte aligned, uninitialised; NULL when out of memory),
 * and reset to the mark on every way out. Never from a pool worker. */
size_t ds4_scratch_mark(void);
void *ds4_scratch_alloc(size_t bytes);
void ds4_scratch_reset(size_t mark);

#endif
