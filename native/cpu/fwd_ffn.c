/* The FFN sublayer (docs/reference/model.md §3.8–3.9): router (sqrt-softplus scores, hash or biased
 * top-k, renormalised unbiased weights), the routed experts one token at a time, and
 * the clamped-SwiGLU shared expert. */
#include "cpu_pool.h"
#include "ds4_expert_cache.h"
#include "fwd_internal.h"

#define WEIGHT_SUM_FLOOR 6.103515625e-05f  /* 2^-14 */

/* Expert ids and weights of one token; prob and taken are n_expert scratch values. */
static int route_token(const ds4_fw_layer *L, const float *logit, int32_t token, float *prob,
                       unsigned char *taken, int32_t *ids, float *wts) {
    int E = L->n_expert, K = L->n_used;
    for (int e = 0; e < E; e++) prob[e] = sqrtf(ds4_fw_softplus(logit[e]));
    if (L->hash_layer) {
        if (token < 0 || (size_t)token >= L->n_vocab) return DS4_FW_BAD_TOKEN;
        const int32_t *row = L->tid2eid + (size_t)token * (size_t)K;
        for (int k = 0; k < K; k++) {
            if (row[k] < 0 || row[k] >= E) return DS4_CPU_BAD_EXPERT;
            ids[k] = row[k];
        }
    } else {
        /* repeated arg-max in ascending index with strict >: ties -> lower index */
        memset(taken, 0, (size_t)E);
        for (int k = 0; k < K; k++) {
            int best = -1;
            float best_sel = 0.0f;
            for (int e = 0; e < E; e++) {
                if (taken[e]) continue;
                float sel = L->probs_bias ? prob[e] + L->probs_bias[e] : prob[e];
                if (best < 0 || sel > best_sel) {
                    best = e;
                    best_sel = sel;
                }
            }
            taken[best] = 1;
            ids[k] = best;
        }
    }
    for (int k = 0; k < K; k++) wts[k] = prob[ids[k]];
    if (L->norm_route) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++) sum += wts[k];
        sum = fmaxf(sum, WEIGHT_SUM_FLOOR);
        for (int k = 0; k < K; k++) wts[k] = wts[k] / sum;
    }
    for (int k = 0; k < K; k++) wts[k] = wts[k] * L->route_scale;
    return DS4_CPU_OK;
}

static float silu(float x) { return x * ds4_fw_sigmoid_stable(x); }

static ds4_cpu_experts experts_of(const ds4_fw_mat *m) {
    ds4_cpu_experts e = {m->data, m->expert_stride, m->row_stride, m->type, m->x8};
    return e;
}

/* Whether the type's dots take a Q8_K activation (ds4_cpu_type_info: every such type). */
static int q8k_type(int type) {
    int kind;
    size_t bv, bb;
    return ds4_cpu_type_info(type, &kind, &bv, &bb) && kind == ACT_Q8K;
}

/* One expert's matrix as a 2-D view. */
static ds4_fw_mat expert_mat(const ds4_fw_mat *m, int32_t e) {
    ds4_fw_mat one = *m;
    one.data = m->data + (size_t)e * m->expert_stride;
    return one;
}

/* ---- routed experts for a block of tokens, grouped by expert ----------------------
 * Every (row, token) dot is the same kernel call on the same quantized activation as
 * the one-token kernel (cpu_moe.c), and each token's down products are summed in slot
 * order, so the result is bit-identical to running the tokens one at a time; grouping
 * only lets a weight row serve every token that chose its expert while it is cached. */

typedef struct {
    int32_t expert;
    size_t first, count;   /* pairs[first .. first+count) are (token, slot) of this expert */
} expert_group;

typedef struct {
    const ds4_fw_layer *L;
    const expert_group *groups;
    const size_t *pairs;           /* token * K + slot, grouped by expert */
    size_t rows, cols, row_tiles;  /* of the matrix this phase multiplies */
    const ds4_cpu_experts *w1, *w2;/* gate, up (phase 1) or down, NULL (phase 2) */
    const ds4_block_q8k *act;      /* per token (phase 1) or per pair (phase 2) */
    size_t act_blocks;
    const ds4_dot_fn *dots1, *dots2;  /* per activation: kernel for w1, w2 */
    const float *route_w;          /* per pair */
    float clamp;
    float *out;                    /* phase 1: mid per pair (n_ff); phase 2: per pair (n_embd) */
    /* phase 1 with IQ2_XXS gate and up on a set with a group tile: the tile, and per
     * token its activation with codes + 128, or NULL where the token takes the scalar
     * kernels (a -128 code) and so the row path */
    ds4_group_tile_fn tile;
    const ds4_block_q8k *const *offset_acts;
    /* phase 2: the table's multi-row kernel (bit-identical per row to row_dot), used for
     * the pairs whose down kernel is row_dot; NULL where the table has none */
    ds4_rows_fn rows_fn;
    ds4_dot_fn row_dot;
    /* phase 2 over repacked down rows (ADR 0067): per pair the group kernel's activation;
     * every pair then goes through ds4_q2k_x8_items, as the one-token path (cpu_moe.c) */
    const uint8_t *x8_acts;
} grouped_job;

#define GROUP_ROW_TILE 16

static float silu_libm(float x) {
    float e = expf(-fabsf(x));
    float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    return x * s;
}

/* Phase 1's output for one (row, pair): clamped SwiGLU of gate v and up u, times the
 * pair's route weight. */
static inline float swiglu_routed(const grouped_job *j, float v, float u, size_t pair) {
    if (j->clamp > 1e-6f) {
        v = fminf(v, j->clamp);
        u = fminf(fmaxf(u, -j->clamp), j->clamp);
    }
    return (silu_libm(v) * u) * j->route_w[pair];
}

enum { GROUP_TILE_TOKS = 8 };

/* Phase 1 rows r0..r1 of one expert for up to GROUP_TILE_TOKS pairs through the tile:
 * gate and up products equal the row kernel's bit for bit, the rest as grouped_rows. */
static void tile_pairs(const grouped_job *j, const uint8_t *b1, const uint8_t *b2, size_t r0,
                       size_t r1, const size_t *pairs, const ds4_block_q8k *const *acts,
                       size_t n) {
    float gv[GROUP_TILE_TOKS * GROUP_ROW_TILE], uv[GROUP_TILE_TOKS * GROUP_ROW_TILE];
    j->tile(b1 + r0 * j->w1->row_stride, j->w1->row_stride, r1 - r0, acts, n, j->cols, gv,
            GROUP_ROW_TILE);
    j->tile(b2 + r0 * j->w2->row_stride, j->w2->row_stride, r1 - r0, acts, n, j->cols, uv,
            GROUP_ROW_TILE);
    for (size_t t = 0; t < n; t++) {
        float *o = j->out + pairs[t] * j->rows;
        for (size_t r = r0; r < r1; r++)
            o[r] = swiglu_routed(j, gv[t * GROUP_ROW_TILE + r - r0], uv[t * GROUP_ROW_TILE + r - r0],
                                 pairs[t]);
    }
}

static void grouped_rows(void *ctx, size_t begin, size_t end) {
    const grouped_job *j = ctx;
    size_t K = (size_t)j->L->n_used;
    for (size_t item = begin; item < end; item++) {
        const expert_group *g = &j->groups[item / j->row_tiles];
        size_t r0 = (item % j->row_tiles) * GROUP_ROW_TILE;
        size_t r1 = r0 + GROUP_ROW_TILE < j->rows ? r0 + GROUP_ROW_TILE : j->rows;
        const uint8_t *b1 = j->w1->base + (size_t)g->expert * j->w1->expert_stride;
        const uint8_t *b2 = j->w2 ? j->w2->base + (size_t)g->expert * j->w2->expert_stride : NULL;
        size_t n_tiled = 0, tiled[GROUP_TILE_TOKS];
        const ds4_block_q8k *tiled_acts[GROUP_TILE_TOKS];
        for (size_t i = g->first; i < g->first + g->count; i++) {
            size_t pair = j->pairs[i];
            if (j->tile && j->offset_acts[pair / K]) {
                tiled[n_tiled] = pair;
                tiled_acts[n_tiled++] = j->offset_acts[pair / K];
                if (n_tiled == GROUP_TILE_TOKS) {
                    tile_pairs(j, b1, b2, r0, r1, tiled, tiled_acts, n_tiled);
                    n_tiled = 0;
                }
                continue;
            }
            size_t a = j->w2 ? pair / K : pair;  /* phase 1 reads the token's activation */
            const ds4_block_q8k *act = j->act + a * j->act_blocks;
            float *o = j->out + pair * j->rows;
#if defined(__x86_64__) || defined(__i386__)
            if (j->x8_acts) {
                ds4_q2k_x8_items(b1, j->rows, j->cols,
                                 j->x8_acts + pair * j->act_blocks * DS4_Q2K_X8_ACT_BYTES, act,
                                 j->dots1[a], ds4_q2k_x8_item_of(j->rows, r0),
                                 ds4_q2k_x8_item_of(j->rows, r1), o + r0);
                continue;
            }
#endif
            if (j->rows_fn && j->dots1[a] == j->row_dot) {
                j->rows_fn(b1 + r0 * j->w1->row_stride, j->w1->row_stride, r1 - r0, act, j->cols,
                           o + r0);
                continue;
            }
            for (size_t r = r0; r < r1; r++) {
                float v = j->dots1[a](b1 + r * j->w1->row_stride, act, j->cols);
                if (b2) v = swiglu_routed(j, v, j->dots2[a](b2 + r * j->w2->row_stride, act, j->cols), pair);
                o[r] = v;
            }
        }
        if (n_tiled) tile_pairs(j, b1, b2, r0, r1, tiled, tiled_acts, n_tiled);
    }
}

/* The two phases of moe_grouped for one expert group at a time, each expert's bytes
 * acquired from the cache (ds4_expert_cache.h) for the group and released after: the
 * same kernel calls on the same bytes and activations per (token, slot) pair, so the
 * contributions are those of the mapped run. dots: 2n gate/up kernels, then P down. */
static int groups_streamed(const ds4_fw_layer *L, size_t n, const expert_group *groups,
                           size_t n_groups, const size_t *pairs, const ds4_block_q8k *xq, ds4_block_q8k *mq,
                           ds4_dot_fn *dots, const float *wts, float *mid, float *contrib,
                           const ds4_dot_table *table, ds4_group_tile_fn tile,
                           const ds4_block_q8k *const *offset_acts) {
    size_t D = (size_t)L->n_embd, F = (size_t)L->n_ff, nb_d = D / 256, nb_f = F / 256;
    size_t tiles_f = (F + GROUP_ROW_TILE - 1) / GROUP_ROW_TILE;
    size_t tiles_d = (D + GROUP_ROW_TILE - 1) / GROUP_ROW_TILE;
    ds4_dot_fn *gdots = dots, *udots = dots + n, *ddots = dots + 2 * n;
    for (size_t g = 0; g < n_groups; g++) {
        const uint8_t *part[3];
        int rc = ds4_xc_acquire(L->xc, L->layer_id, groups[g].expert, part);
        if (rc) return rc;
        ds4_cpu_experts gate = {part[0], 0, L->gate_exps.row_stride, L->gate_exps.type, 0};
        ds4_cpu_experts up = {part[1], 0, L->up_exps.row_stride, L->up_exps.type, 0};
        ds4_cpu_experts down = {part[2], 0, L->down_exps.row_stride, L->down_exps.type, 0};
        expert_group one = {0, groups[g].first, groups[g].count};
        grouped_job job1 = {L, &one, pairs, F, D, tiles_f, &gate, &up, xq, nb_d, gdots, udots,
                            wts, L->clamp, mid, tile, offset_acts, NULL, NULL, NULL};
        ds4_pool_run(grouped_rows, &job1, tiles_f, 1);
        for (size_t i = one.first; i < one.first + one.count; i++) {
            size_t p = pairs[i];
            ds4_cpu_quantize_q8k(mid + p * F, F, mq + p * nb_f);
            const ds4_dot_table *tt =
                ds4_cpu_act_has_min_code(ACT_Q8K, mq + p * nb_f, F) ? &ds4_dots_scalar : table;
            ddots[p] = ds4_cpu_pick_dot(tt, down.type);
        }
        grouped_job job2 = {L, &one, pairs, D, F, tiles_d, &down, NULL, mq, nb_f, ddots, NULL,
                            wts, 0.0f, contrib, NULL, NULL, ds4_cpu_pick_rows(table, down.type),
                            ds4_cpu_pick_dot(table, down.type), NULL};
        ds4_pool_run(grouped_rows, &job2, tiles_d, 1);
        ds4_xc_release(L->xc, L->layer_id, groups[g].expert);
    }
    return DS4_CPU_OK;
}

static int moe_grouped(const ds4_fw_layer *L, const float *x, size_t n, const int32_t *ids,
                       const float *wts, float *out, int impl) {
    size_t D = (size_t)L->n_embd, F = (size_t)L->n_ff, K = (size_t)L->n_used;
    size_t E = (size_t)L->n_expert, P = n * K, nb_d = D / 256, nb_f = F / 256;
    const ds4_dot_table *table = ds4_cpu_dot_table(impl);
    if (!table) return DS4_CPU_BAD_IMPL;
    if (D % 256 || F % 256 || ds4_cpu_row_bytes(L->gate_exps.type, D) > L->gate_exps.row_stride ||
        ds4_cpu_row_bytes(L->up_exps.type, D) > L->up_exps.row_stride ||
        ds4_cpu_row_bytes(L->down_exps.type, F) > L->down_exps.row_stride)
        return DS4_CPU_BAD_SHAPE;
    for (size_t p = 0; p < n * K; p++)
        if (ids[p] < 0 || (size_t)ids[p] >= E) return DS4_CPU_BAD_EXPERT;
    ds4_cpu_experts gate = experts_of(&L->gate_exps), up = experts_of(&L->up_exps);
    ds4_cpu_experts down = experts_of(&L->down_exps);
    /* repacked rows: the AVX-512 group kernel only, and never with the expert cache */
    if (down.x8 && (down.type != T_Q2_K || !ds4_cpu_x8_impl(impl))) return DS4_CPU_BAD_IMPL;
    if (down.x8 && L->xc) return DS4_FW_BAD_STATE;
    size_t mark = ds4_scratch_mark();
    size_t *pairs = ds4_scratch_alloc(P * sizeof *pairs);
    size_t *count = ds4_scratch_alloc((E + 1) * sizeof *count);
    expert_group *groups = ds4_scratch_alloc(P * sizeof *groups);
    ds4_block_q8k *xq = ds4_scratch_alloc(n * nb_d * sizeof *xq);
    ds4_block_q8k *mq = ds4_scratch_alloc(P * nb_f * sizeof *mq);
    ds4_dot_fn *dots = ds4_scratch_alloc((2 * n + P) * sizeof *dots);
    float *mid = ds4_scratch_alloc(P * F * sizeof *mid);
    float *contrib = ds4_scratch_alloc(P * D * sizeof *contrib);
    uint8_t *x8_acts = down.x8 ? ds4_scratch_alloc(P * nb_f * DS4_Q2K_X8_ACT_BYTES) : NULL;
    int rc = DS4_CPU_NO_MEMORY;
    if (!pairs || !count || !groups || !xq || !mq || !dots || !mid || !contrib ||
        (down.x8 && !x8_acts))
        goto done;
    memset(count, 0, (E + 1) * sizeof *count);

    /* counting sort of the (token, slot) pairs by expert, stable in pair order */
    for (size_t p = 0; p < P; p++) count[ids[p] + 1]++;
    for (size_t e = 0; e < E; e++) count[e + 1] += count[e];
    size_t n_groups = 0;
    for (size_t e = 0; e < E; e++)
        if (count[e + 1] > count[e]) groups[n_groups++] = (expert_group){(int32_t)e, count[e], count[e + 1] - count[e]};
    for (size_t p = 0; p < P; p++) pairs[count[ids[p]]++] = p;

    /* gate and up through the group tile where the set has one for their type: each token's
     * Q8_K codes offset by 128 once here, shared by every expert it chose */
    ds4_group_tile_fn tile =
        gate.type == up.type ? ds4_cpu_pick_group_tile(table, gate.type) : NULL;
    ds4_block_q8k *xoff = tile ? ds4_scratch_alloc(n * nb_d * sizeof *xoff) : NULL;
    const ds4_block_q8k **offset_acts = tile ? ds4_scratch_alloc(n * sizeof *offset_acts) : NULL;
    if (tile && (!xoff || !offset_acts)) goto done;
    ds4_dot_fn *gdots = dots, *udots = dots + n, *ddots = dots + 2 * n;
    for (size_t t = 0; t < n; t++) {
        ds4_cpu_quantize_q8k(x + t * D, D, xq + t * nb_d);
        int exact = ds4_cpu_act_has_min_code(ACT_Q8K, xq + t * nb_d, D);
        const ds4_dot_table *tt = exact ? &ds4_dots_scalar : table;
        gdots[t] = ds4_cpu_pick_dot(tt, gate.type);
        udots[t] = ds4_cpu_pick_dot(tt, up.type);
        if (tile) {
            ds4_cpu_q8k_offset(xq + t * nb_d, nb_d, xoff + t * nb_d);
            offset_acts[t] = exact ? NULL : xoff + t * nb_d;
        }
    }
    size_t tiles_f = (F + GROUP_ROW_TILE - 1) / GROUP_ROW_TILE;
    size_t tiles_d = (D + GROUP_ROW_TILE - 1) / GROUP_ROW_TILE;
    if (L->xc) {  /* SSD streaming: one expert at a time out of the cache */
        rc = groups_streamed(L, n, groups, n_groups, pairs, xq, mq, dots, wts, mid, contrib, table,
                             tile, offset_acts);
        if (rc) goto done;
        goto sum;
    }
    grouped_job job1 = {L, groups, pairs, F, D, tiles_f, &gate, &up, xq, nb_d, gdots, udots,
                        wts, L->clamp, mid, tile, offset_acts, NULL, NULL, NULL};
    ds4_pool_run(grouped_rows, &job1, n_groups * tiles_f, 1);

    for (size_t p = 0; p < P; p++) {
        ds4_cpu_quantize_q8k(mid + p * F, F, mq + p * nb_f);
        const ds4_dot_table *tt =
            ds4_cpu_act_has_min_code(ACT_Q8K, mq + p * nb_f, F) ? &ds4_dots_scalar : table;
        ddots[p] = ds4_cpu_pick_dot(tt, down.type);
#if defined(__x86_64__) || defined(__i386__)
        if (x8_acts) ds4_q2k_x8_act_avx512(mq + p * nb_f, nb_f, x8_acts + p * nb_f * DS4_Q2K_X8_ACT_BYTES);
#endif
    }
    grouped_job job2 = {L, groups, pairs, D, F, tiles_d, &down, NULL, mq, nb_f, ddots, NULL,
                        wts, 0.0f, contrib, NULL, NULL, ds4_cpu_pick_rows(table, down.type),
                        ds4_cpu_pick_dot(table, down.type), x8_acts};
    ds4_pool_run(grouped_rows, &job2, n_groups * tiles_d, 1);

sum:
    for (size_t t = 0; t < n; t++) {
        float *o = out + t * D;
        for (size_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (size_t k = 0; k < K; k++) acc += contrib[(t * K + k) * D + d];
            o[d] = acc;
        }
    }
    rc = DS4_CPU_OK;
done:
    ds4_scratch_reset(mark);
    return rc;
}

/* Routed experts for weight types without the fused Q8_K kernel (F32/F16/BF16/Q8_0):
 * per slot gate/up products, clamped SwiGLU times the route weight, down product, and
 * the slots summed in order (docs/reference/model.md §3.9's composition). */
static int moe_generic(const ds4_fw_layer *L, const float *x, const int32_t *ids,
                       const float *wts, float *out, int impl) {
    size_t D = (size_t)L->n_embd, F = (size_t)L->n_ff;
    size_t mark = ds4_scratch_mark();
    float *gt = ds4_scratch_alloc((3 * F + D) * sizeof *gt);
    if (!gt) return DS4_CPU_NO_MEMORY;
    float *up = gt + F, *mid = up + F, *down = mid + F;
    int rc = DS4_CPU_OK;
    for (size_t d = 0; d < D; d++) out[d] = 0.0f;
    for (int k = 0; k < L->n_used && !rc; k++) {
        ds4_fw_mat g = expert_mat(&L->gate_exps, ids[k]), u = expert_mat(&L->up_exps, ids[k]);
        ds4_fw_mat dn = expert_mat(&L->down_exps, ids[k]);
        if (L->xc) {  /* SSD streaming: the expert's bytes from the cache */
            const uint8_t *part[3];
            if ((rc = ds4_xc_acquire(L->xc, L->layer_id, ids[k], part))) break;
            g.data = part[0];
            u.data = part[1];
            dn.data = part[2];
        }
        rc = ds4_fw_matmul(&g, 0, F, x, D, 1, gt, F, impl);
        if (!rc) rc = ds4_fw_matmul(&u, 0, F, x, D, 1, up, F, impl);
        if (rc) {
            if (L->xc) ds4_xc_release(L->xc, L->layer_id, ids[k]);
            break;
        }
        for (size_t i = 0; i < F; i++) {
            float gv = gt[i], uv = up[i];
            if (L->clamp > 1e-6f) {
                gv = fminf(gv, L->clamp);
                uv = fminf(fmaxf(uv, -L->clamp), L->clamp);
            }
            mid[i] = (silu(gv) * uv) * wts[k];
        }
        rc = ds4_fw_matmul(&dn, 0, D, mid, F, 1, down, D, impl);
        if (L->xc) ds4_xc_release(L->xc, L->layer_id, ids[k]);
        if (rc) break;
        for (size_t d = 0; d < D; d++) out[d] = out[d] + down[d];
    }
    ds4_scratch_reset(mark);
    return rc;
}

/* SSD streaming read-ahead: the next layer's router on this layer's FFN input (the
 * residual stream changes little from one layer to the next) predicts the experts it
 * will route to -- exactly, where the next layer is hash-routed -- and the cache loads
 * the missing ones on its thread while this layer computes, the likeliest first (the
 * cache takes as many as its read-ahead count). Only what is cached changes, never a value;
 * a prediction that cannot be made is skipped. */
static void read_ahead_next(const ds4_fw_layer *L, const float *g, const int32_t *tokens,
                            size_t n, const int32_t *cur_ids, int impl) {
    const ds4_fw_layer *N = L->next;
    size_t D = (size_t)L->n_embd, E = (size_t)N->n_expert, K = (size_t)N->n_used;
    if (N->n_embd != L->n_embd || N->gate_inp.rows != E || K > E || (N->hash_layer && !N->tid2eid))
        return;
    size_t mark = ds4_scratch_mark();
    float *logit = ds4_scratch_alloc(n * E * sizeof *logit);
    float *prob = ds4_scratch_alloc(E * sizeof *prob);
    unsigned char *taken = ds4_scratch_alloc(E);
    int32_t *ids = ds4_scratch_alloc(K * sizeof *ids);
    float *wts = ds4_scratch_alloc(K * sizeof *wts);
    uint32_t *votes = ds4_scratch_alloc(E * sizeof *votes);
    int32_t *order = ds4_scratch_alloc(E * sizeof *order);
    int32_t *keep = ds4_scratch_alloc((size_t)L->n_expert * sizeof *keep);
    unsigned char *kept = ds4_scratch_alloc((size_t)L->n_expert);
    if (!logit || !prob || !taken || !ids || !wts || !votes || !order || !keep || !kept) goto done;
    if (N->hash_layer)
        memset(logit, 0, n * E * sizeof *logit);  /* ids come from the token alone */
    else if (ds4_fw_matmul(&N->gate_inp, 0, E, g, D, n, logit, E, impl))
        goto done;
    /* an expert's weight: over the tokens, K for a token's first pick down to 1 for its
     * last (route_token picks in falling score; a hash row counts in its order) */
    memset(votes, 0, E * sizeof *votes);
    uint32_t most = 0;
    for (size_t t = 0; t < n; t++) {
        if (route_token(N, logit + t * E, tokens[t], prob, taken, ids, wts)) goto done;
        for (size_t k = 0; k < K; k++) {
            votes[ids[k]] += (uint32_t)(K - k);
            if (votes[ids[k]] > most) most = votes[ids[k]];
        }
    }
    int m = 0;
    for (uint32_t v = most; v > 0; v--)
        for (size_t e = 0; e < E; e++)
            if (votes[e] == v) order[m++] = (int32_t)e;
    int n_keep = 0;
    memset(kept, 0, (size_t)L->n_expert);
    for (size_t i = 0; i < n * (size_t)L->n_used; i++)
        if (!kept[cur_ids[i]]) {
            kept[cur_ids[i]] = 1;
            keep[n_keep++] = cur_ids[i];
        }
    ds4_xc_readahead(L->xc, L->layer_id + 1, order, m, L->layer_id, keep, n_keep);
done:
    ds4_scratch_reset(mark);
}

int ds4_fw_ffn(const ds4_fw_layer *L, const float *g, const int32_t *tokens, size_t n,
               float *out, int impl) {
    size_t D = (size_t)L->n_embd, E = (size_t)L->n_expert, K = (size_t)L->n_used;
    size_t FS = L->gate_sh.rows;
    if (K > E || L->gate_inp.rows != E) return DS4_CPU_BAD_SHAPE;
    if (L->hash_layer && !L->tid2eid) return DS4_FW_BAD_STATE;
    size_t mark = ds4_scratch_mark();
    float *logit = ds4_scratch_alloc(n * E * sizeof *logit);
    float *prob = ds4_scratch_alloc(E * sizeof *prob);
    unsigned char *taken = ds4_scratch_alloc(E);
    float *gs = ds4_scratch_alloc(2 * n * FS * sizeof *gs);
    float *moe = ds4_scratch_alloc(D * sizeof *moe);
    int32_t *all_ids = ds4_scratch_alloc(n * K * sizeof *all_ids);
    float *all_wts = ds4_scratch_alloc(n * K * sizeof *all_wts);
    int rc = DS4_CPU_NO_MEMORY;
    if (!logit || !prob || !taken || !gs || !moe || !all_ids || !all_wts) goto done;
    float *us = gs + n * FS;
    if ((rc = ds4_fw_matmul(&L->gate_inp, 0, E, g, D, n, logit, E, impl))) goto done;

    ds4_cpu_experts gate = experts_of(&L->gate_exps), up = experts_of(&L->up_exps);
    ds4_cpu_experts down = experts_of(&L->down_exps);
    int fused = q8k_type(gate.type) && q8k_type(up.type) && q8k_type(down.type);
    if (down.x8 && !fused) {  /* repacked rows have only the fused path's kernel */
        rc = DS4_CPU_BAD_TYPE;
        goto done;
    }
    for (size_t t = 0; t < n; t++) {
        int32_t *ids = all_ids + t * K;
        float *wts = all_wts + t * K;
        if ((rc = route_token(L, logit + t * E, tokens[t], prob, taken, ids, wts))) goto done;
        if (fused && (n > 1 || L->xc)) continue;  /* grouped below */
        if (fused)
            rc = ds4_cpu_moe_strict(g + t * D, D, (size_t)L->n_ff, E, &gate, &up, &down, ids,
                                    wts, K, L->clamp, out + t * D, impl, 1);
        else
            rc = moe_generic(L, g + t * D, ids, wts, out + t * D, impl);
        if (rc) goto done;
    }
    /* SSD streaming: the next layer's predicted experts load while this one computes */
    if (L->xc && L->next) read_ahead_next(L, g, tokens, n, all_ids, impl);
    if (fused && (n > 1 || L->xc) && (rc = moe_grouped(L, g, n, all_ids, all_wts, out, impl)))
        goto done;

    if ((rc = ds4_fw_matmul(&L->gate_sh, 0, FS, g, D, n, gs, FS, impl)) ||
        (rc = ds4_fw_matmul(&L->up_sh, 0, FS, g, D, n, us, FS, impl)))
        goto done;
    float c = L->clamp;
    for (size_t i = 0; i < n * FS; i++) {
        float gv = gs[i], uv = us[i];
        if (c > 1e-6f) {
            gv = fminf(gv, c);
            uv = fminf(fmaxf(uv, -c), c);
        }
        gs[i] = silu(gv) * uv;
    }
    for (size_t t = 0; t < n; t++) {
        if ((rc = ds4_fw_matmul(&L->down_sh, 0, D, gs + t * FS, FS, 1, moe, D, impl))) goto done;
        float *o = out + t * D;
        for (size_t d = 0; d < D; d++) o[d] = o[d] + moe[d];
    }
    rc = DS4_CPU_OK;
done:
    ds4_scratch_reset(mark);
    return rc;
}
