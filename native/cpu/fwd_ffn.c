/* The FFN sublayer (model.md §3.8-3.9): router (sqrt-softplus scores, hash or biased
 * top-k, renormalised unbiased weights), the routed experts one token at a time, and
 * the clamped-SwiGLU shared expert. */
#include <stdlib.h>

#include "fwd_internal.h"

#define MAX_USED 64
#define WEIGHT_SUM_FLOOR 6.103515625e-05f  /* 2^-14 */

/* Expert ids and weights of one token. */
static int route_token(const ds4_fw_layer *L, const float *logit, int32_t token, float *prob,
                       int32_t *ids, float *wts) {
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
        unsigned char taken[1024] = {0};
        if (E > 1024) return DS4_CPU_BAD_SHAPE;
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

int ds4_fw_ffn(const ds4_fw_layer *L, const float *g, const int32_t *tokens, size_t n,
               float *out, int impl) {
    size_t D = (size_t)L->n_embd, E = (size_t)L->n_expert, K = (size_t)L->n_used;
    size_t FS = L->gate_sh.rows;
    if (K > MAX_USED || K > E || L->gate_inp.rows != E) return DS4_CPU_BAD_SHAPE;
    if (L->hash_layer && !L->tid2eid) return DS4_FW_BAD_STATE;
    float *logit = malloc(n * E * sizeof *logit), *prob = malloc(E * sizeof *prob);
    float *gs = malloc(2 * n * FS * sizeof *gs), *moe = malloc(D * sizeof *moe);
    int rc = DS4_CPU_NO_MEMORY;
    if (!logit || !prob || !gs || !moe) goto done;
    float *us = gs + n * FS;
    if ((rc = ds4_fw_matmul(&L->gate_inp, 0, E, g, D, n, logit, E, impl))) goto done;

    ds4_cpu_experts gate = {L->gate_exps.data, L->gate_exps.expert_stride,
                            L->gate_exps.row_stride, L->gate_exps.type};
    ds4_cpu_experts up = {L->up_exps.data, L->up_exps.expert_stride, L->up_exps.row_stride,
                          L->up_exps.type};
    ds4_cpu_experts down = {L->down_exps.data, L->down_exps.expert_stride,
                            L->down_exps.row_stride, L->down_exps.type};
    for (size_t t = 0; t < n; t++) {
        int32_t ids[MAX_USED];
        float wts[MAX_USED];
        if ((rc = route_token(L, logit + t * E, tokens[t], prob, ids, wts))) goto done;
        rc = ds4_cpu_moe_strict(g + t * D, D, (size_t)L->n_ff, E, &gate, &up, &down, ids, wts, K,
                                L->clamp, out + t * D, impl, 1);
        if (rc) goto done;
    }

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
    free(logit), free(prob), free(gs), free(moe);
    return rc;
}
