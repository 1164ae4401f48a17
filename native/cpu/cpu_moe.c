/* Routed MoE for one token (docs/reference/formats.md §5.8): Q8_K of x, gate/up rows of the
 * selected experts, clamped SwiGLU times the route weight, Q8_K of each expert's mid vector,
 * then per output row the down dots summed in selection order. */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_pool.h"
#include "fwd_internal.h"

typedef struct {
    size_t n_embd, n_ff, n_used;
    const ds4_cpu_experts *gate, *up, *down;
    const int32_t *ids;
    const float *route_w;
    float clamp;
    int libm_exp;
    ds4_dot_fn gate_dot, up_dot;
    const ds4_dot_fn *down_dots;   /* per used expert (scalar for -128 codes) */
    ds4_rows_fn down_rows;         /* multi-row kernel for experts whose dot is down_row_dot */
    ds4_dot_fn down_row_dot;
    const ds4_block_q8k *xq;
    float *mid;                    /* n_used x n_ff */
    const ds4_block_q8k *midq;     /* n_used x n_ff/256 blocks */
    float *out;
    /* down->x8: per used expert the group kernel's activation (n_ff/256 x
     * DS4_Q2K_X8_ACT_BYTES), and the pool's items are the repacked tensor's */
    const uint8_t *x8_acts;
} moe_job;

/* x * sigmoid(x) with the branch that cannot overflow (scalar_ops.silu). The numpy
 * reference rounds an f64 exp once; the strict native forward uses libm's expf, as the
 * validated reference build does (the two differ in rare last-ulp cases). */
static inline float silu(float x, int libm_exp) {
    float e = libm_exp ? expf(-fabsf(x)) : (float)exp(-(double)fabsf(x));
    float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    return x * s;
}

static const uint8_t *expert_row(const ds4_cpu_experts *t, int32_t e, size_t r) {
    return t->base + (size_t)e * t->expert_stride + r * t->row_stride;
}

static void moe_gate_up(void *ctx, size_t begin, size_t end) {
    const moe_job *job = ctx;
    for (size_t i = begin; i < end; i++) {
        size_t k = i / job->n_ff, r = i % job->n_ff;
        int32_t e = job->ids[k];
        float g = job->gate_dot(expert_row(job->gate, e, r), job->xq, job->n_embd);
        float u = job->up_dot(expert_row(job->up, e, r), job->xq, job->n_embd);
        if (job->clamp > 1e-6f) {
            g = fminf(g, job->clamp);
            u = fminf(fmaxf(u, -job->clamp), job->clamp);
        }
        job->mid[i] = (silu(g, job->libm_exp) * u) * job->route_w[k];
    }
}

/* Rows taken per multi-row kernel call in moe_down. */
#define DOWN_ROWS 16

#if defined(__x86_64__) || defined(__i386__)
/* Items per call in moe_down_x8: 4 groups of 8 rows. */
#define DOWN_ITEMS 4

/* moe_down over repacked down rows (ADR 0067): items begin .. end of the tensor, each
 * row's expert products summed in selection order as below, every product through
 * ds4_q2k_x8_items, as the grouped prefill path does (fwd_ffn.c). */
static void moe_down_x8(void *ctx, size_t begin, size_t end) {
    const moe_job *job = ctx;
    size_t nb = job->n_ff / 256, rows = job->n_embd, groups = rows / DS4_Q2K_X8_ROWS;
    for (size_t i0 = begin; i0 < end; i0 += DOWN_ITEMS) {
        size_t i1 = end - i0 < DOWN_ITEMS ? end : i0 + DOWN_ITEMS;
        size_t r0 = i0 < groups ? DS4_Q2K_X8_ROWS * i0 : DS4_Q2K_X8_ROWS * groups + (i0 - groups);
        size_t r1 = i1 < groups ? DS4_Q2K_X8_ROWS * i1 : DS4_Q2K_X8_ROWS * groups + (i1 - groups);
        float acc[DOWN_ITEMS * DS4_Q2K_X8_ROWS] = {0}, part[DOWN_ITEMS * DS4_Q2K_X8_ROWS];
        for (size_t k = 0; k < job->n_used; k++) {
            const uint8_t *w = job->down->base + (size_t)job->ids[k] * job->down->expert_stride;
            ds4_q2k_x8_items(w, rows, job->n_ff, job->x8_acts + k * nb * DS4_Q2K_X8_ACT_BYTES,
                             job->midq + k * nb, job->down_dots[k], i0, i1, part);
            for (size_t i = 0; i < r1 - r0; i++) acc[i] += part[i];
        }
        for (size_t i = 0; i < r1 - r0; i++) job->out[r0 + i] = acc[i];
    }
}
#endif

static void moe_down(void *ctx, size_t begin, size_t end) {
    const moe_job *job = ctx;
    size_t nb = job->n_ff / 256;
    if (job->down_rows) {
        /* the multi-row kernel's y[r] equals the row kernel's, and each row still sums
         * its experts' products in selection order: the same result as below */
        for (size_t r0 = begin; r0 < end; r0 += DOWN_ROWS) {
            size_t n = end - r0 < DOWN_ROWS ? end - r0 : DOWN_ROWS;
            float acc[DOWN_ROWS] = {0}, part[DOWN_ROWS];
            for (size_t k = 0; k < job->n_used; k++) {
                const uint8_t *w = expert_row(job->down, job->ids[k], r0);
                const ds4_block_q8k *a = job->midq + k * nb;
                if (job->down_dots[k] == job->down_row_dot)
                    job->down_rows(w, job->down->row_stride, n, a, job->n_ff, part);
                else
                    for (size_t i = 0; i < n; i++)
                        part[i] = job->down_dots[k](w + i * job->down->row_stride, a, job->n_ff);
                for (size_t i = 0; i < n; i++) acc[i] += part[i];
            }
            for (size_t i = 0; i < n; i++) job->out[r0 + i] = acc[i];
        }
        return;
    }
    for (size_t r = begin; r < end; r++) {
        float acc = 0.0f;
        for (size_t k = 0; k < job->n_used; k++)
            acc += job->down_dots[k](expert_row(job->down, job->ids[k], r), job->midq + k * nb,
                                     job->n_ff);
        job->out[r] = acc;
    }
}

static int q8k_weight(const ds4_cpu_experts *t, size_t cols) {
    int kind;
    size_t bv, bb;
    if (!ds4_cpu_type_info(t->type, &kind, &bv, &bb) || kind != ACT_Q8K) return DS4_CPU_BAD_TYPE;
    if (cols % 256 || t->row_stride < cols / bv * bb) return DS4_CPU_BAD_SHAPE;
    return DS4_CPU_OK;
}

int ds4_cpu_moe(const float *x, size_t n_embd, size_t n_ff, size_t n_expert,
                const ds4_cpu_experts *gate, const ds4_cpu_experts *up,
                const ds4_cpu_experts *down, const int32_t *expert_ids,
                const float *route_weights, size_t n_used, float clamp, float *out,
                int impl) {
    return ds4_cpu_moe_strict(x, n_embd, n_ff, n_expert, gate, up, down, expert_ids,
                              route_weights, n_used, clamp, out, impl, 0);
}

int ds4_cpu_moe_strict(const float *x, size_t n_embd, size_t n_ff, size_t n_expert,
                       const ds4_cpu_experts *gate, const ds4_cpu_experts *up,
                       const ds4_cpu_experts *down, const int32_t *expert_ids,
                       const float *route_weights, size_t n_used, float clamp, float *out,
                       int impl, int libm_exp) {
    int rc;
    if ((rc = q8k_weight(gate, n_embd)) || (rc = q8k_weight(up, n_embd)) ||
        (rc = q8k_weight(down, n_ff)))
        return rc;
    if (n_embd == 0 || n_ff == 0) return DS4_CPU_BAD_SHAPE;
    for (size_t k = 0; k < n_used; k++)
        if (expert_ids[k] < 0 || (size_t)expert_ids[k] >= n_expert) return DS4_CPU_BAD_EXPERT;
    const ds4_dot_table *table = ds4_cpu_dot_table(impl);
    if (!table) return DS4_CPU_BAD_IMPL;
    /* repacked rows are read by the AVX-512 group kernel only */
    if (down->x8 && (down->type != T_Q2_K || !ds4_cpu_x8_impl(impl))) return DS4_CPU_BAD_IMPL;

    size_t nb_in = n_embd / 256, nb_ff = n_ff / 256;
    size_t mark = ds4_scratch_mark();
    ds4_block_q8k *xq = ds4_scratch_alloc(nb_in * sizeof *xq);
    ds4_block_q8k *midq = ds4_scratch_alloc(n_used * nb_ff * sizeof *midq);
    float *mid = ds4_scratch_alloc(n_used * n_ff * sizeof *mid);
    ds4_dot_fn *down_dots = ds4_scratch_alloc(n_used * sizeof *down_dots);
    uint8_t *x8_acts = down->x8 ? ds4_scratch_alloc(n_used * nb_ff * DS4_Q2K_X8_ACT_BYTES) : NULL;
    if (!xq || !midq || !mid || !down_dots || (down->x8 && !x8_acts)) {
        ds4_scratch_reset(mark);
        return DS4_CPU_NO_MEMORY;
    }
    ds4_cpu_quantize_q8k(x, n_embd, xq);
    const ds4_dot_table *in_table =
        ds4_cpu_act_has_min_code(ACT_Q8K, xq, n_embd) ? &ds4_dots_scalar : table;
    moe_job job = {n_embd, n_ff, n_used, gate, up, down, expert_ids, route_weights, clamp,
                   libm_exp, ds4_cpu_pick_dot(in_table, gate->type), ds4_cpu_pick_dot(in_table, up->type),
                   down_dots, ds4_cpu_pick_rows(table, down->type),
                   ds4_cpu_pick_dot(table, down->type), xq, mid, midq, out, x8_acts};
    ds4_pool_run(moe_gate_up, &job, n_used * n_ff, 32);
    for (size_t k = 0; k < n_used; k++) {
        ds4_cpu_quantize_q8k(mid + k * n_ff, n_ff, midq + k * nb_ff);
        int exact = ds4_cpu_act_has_min_code(ACT_Q8K, midq + k * nb_ff, n_ff);
        down_dots[k] = ds4_cpu_pick_dot(exact ? &ds4_dots_scalar : table, down->type);
    }
#if defined(__x86_64__) || defined(__i386__)
    if (down->x8) {
        for (size_t k = 0; k < n_used; k++)
            ds4_q2k_x8_act_avx512(midq + k * nb_ff, nb_ff, x8_acts + k * nb_ff * DS4_Q2K_X8_ACT_BYTES);
        ds4_pool_run(moe_down_x8, &job, ds4_q2k_x8_item_of(n_embd, n_embd), DOWN_ITEMS);
        ds4_scratch_reset(mark);
        return DS4_CPU_OK;
    }
#endif
    ds4_pool_run(moe_down, &job, n_embd, 32);
    ds4_scratch_reset(mark);
    return DS4_CPU_OK;
}
