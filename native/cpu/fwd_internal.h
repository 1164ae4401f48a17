/* Internals shared by the native forward files (fwd_*.c). */
#ifndef DS4_FWD_INTERNAL_H
#define DS4_FWD_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"
#include "ds4_forward.h"

#define DS4_FW_MAX_HC 16

/* binary32 -> binary16, round to nearest even, overflow to inf, subnormals kept. */
static inline uint16_t ds4_f32_to_f16_rne(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)  /* inf, or NaN kept quiet */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520: rounds to inf */
    if (ax >= 0x38800000u) {  /* a normal binary16 */
        uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  /* a carry bumps the exponent */
        return (uint16_t)(sign | h);
    }
    float a;
    memcpy(&a, &ax, 4);
    /* subnormal: units of 2^-24; the scaling is exact and rintf rounds ties to even */
    return (uint16_t)(sign | (uint16_t)rintf(a * 16777216.0f));
}

static inline float ds4_f16_to_f32_exact(uint16_t h) { return f16_to_f32(h); }

/* Dot product and acc += w * x over f32 vectors (attention, indexer). */
typedef struct {
    float (*dot)(const float *a, const float *b, size_t n);
    void (*axpy)(float *acc, float w, const float *x, size_t n);
} ds4_fw_vec;

/* Strictly sequential for the scalar implementation, SIMD for the others. */
const ds4_fw_vec *ds4_fw_vec_for(int impl);

float ds4_fw_sigmoid_stable(float x);
float ds4_fw_softplus(float x);
void ds4_fw_f16round(float *v, size_t n);

/* y[t][r] = M[r] . x[t] over n tokens (the matmul kernels; activation quantized as the
 * type requires). rows_from/rows_n pick a range of output rows. */
int ds4_fw_matmul(const ds4_fw_mat *m, size_t rows_from, size_t rows_n, const float *x,
                  size_t x_stride, size_t n, float *y, size_t y_stride, int impl);

/* The attention sublayer over a block of rows: h (n, n_embd) -> out (n, n_embd). Row t
 * is at position rpos[t] of the sequence whose layer state is rs[t]; rows of one state
 * come in position order (one sequence's chunk, or one row each of several). */
int ds4_fw_attention(const ds4_fw_layer *L, ds4_fw_state *const *rs, const int64_t *rpos,
                     const float *h, size_t n, float *out, const ds4_fw_opts *opt);

/* The FFN sublayer: g (n, n_embd) -> out (n, n_embd). */
int ds4_fw_ffn(const ds4_fw_layer *L, const float *g, const int32_t *tokens, size_t n,
               float *out, int impl);

/* Routed MoE of one token with libm expf in the SwiGLU (see cpu_moe.c). */
int ds4_cpu_moe_strict(const float *x, size_t n_embd, size_t n_ff, size_t n_expert,
                       const ds4_cpu_experts *gate, const ds4_cpu_experts *up,
                       const ds4_cpu_experts *down, const int32_t *expert_ids,
                       const float *route_weights, size_t n_used, float clamp, float *out,
                       int impl, int libm_exp);

#endif
