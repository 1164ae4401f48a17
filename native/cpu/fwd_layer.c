/* One layer (docs/reference/model.md §3.3): HC pre, attention, HC post, HC pre, FFN, HC post; and
 * the output head (docs/reference/model.md §3.10). Tokens go through in blocks of BLOCK_TOKENS so
 * scratch memory stays bounded; blocks run in position order, so each token sees exactly the
 * state a one-token decode would give it (docs/reference/model.md §3.11). */
#include "fwd_internal.h"

#define BLOCK_TOKENS 256

/* HC pre for n tokens: per token the normalised flat streams, the 2S+S^2 projection,
 * the split (pre/post/comb) and x_in = sum_h pre[h] X[h] (docs/reference/model.md §3.2). */
static int hc_pre(const ds4_fw_layer *L, const ds4_fw_mat *fn, const float *scale,
                  const float *base, const float *streams, size_t n, float *x_in,
                  float *post, float *comb, float *scratch, int impl) {
    size_t D = (size_t)L->n_embd, S = (size_t)L->n_hc, flat_n = S * D, mix_n = fn->rows;
    float *flat = scratch, *mix = scratch + n * flat_n;
    for (size_t t = 0; t < n; t++)
        ds4_fw_rmsnorm(streams + t * flat_n, NULL, flat_n, L->rms_eps, flat + t * flat_n);
    int rc = ds4_fw_matmul(fn, 0, mix_n, flat, flat_n, n, mix, mix_n, impl);
    if (rc) return rc;
    for (size_t t = 0; t < n; t++) {
        float pre[DS4_FW_MAX_HC];
        ds4_fw_hc_split(mix + t * mix_n, scale, base, (int)S, L->sinkhorn_iters, L->hc_eps,
                        pre, post + t * S, comb + t * S * S);
        const float *X = streams + t * flat_n;
        float *xi = x_in + t * D;
        for (size_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (size_t h = 0; h < S; h++) acc += pre[h] * X[h * D + d];
            xi[d] = acc;
        }
    }
    return DS4_CPU_OK;
}

/* X_new[j] = post[j] * y + sum_i comb[i][j] X[i], in place over the streams. */
static void hc_post(const ds4_fw_layer *L, const float *y, const float *post, const float *comb,
                    float *streams, size_t n) {
    size_t D = (size_t)L->n_embd, S = (size_t)L->n_hc;
    float old[DS4_FW_MAX_HC];
    for (size_t t = 0; t < n; t++) {
        float *X = streams + t * S * D;
        const float *c = comb + t * S * S, *p = post + t * S, *yt = y + t * D;
        for (size_t d = 0; d < D; d++) {
            for (size_t i = 0; i < S; i++) old[i] = X[i * D + d];
            for (size_t j = 0; j < S; j++) {
                float acc = p[j] * yt[d];
                for (size_t i = 0; i < S; i++) acc += c[i * S + j] * old[i];
                X[j * D + d] = acc;
            }
        }
    }
}

static int layer_block(const ds4_fw_layer *L, ds4_fw_state *const *rs, const int64_t *rpos,
                       float *streams, const int32_t *tokens, size_t n, const ds4_fw_opts *opt,
                       float *buf) {
    int impl = opt->impl;
    size_t D = (size_t)L->n_embd, H = (size_t)L->n_hc;
    size_t mix_n = 2 * H + H * H;
    float *x_in = buf, *h = x_in + n * D, *y = h + n * D;
    float *post = y + n * D, *comb = post + n * H, *scratch = comb + n * H * H;
    int rc = hc_pre(L, &L->hc_attn_fn, L->hc_attn_scale, L->hc_attn_base, streams, n, x_in,
                    post, comb, scratch, impl);
    if (rc) return rc;
    for (size_t t = 0; t < n; t++)
        ds4_fw_rmsnorm(x_in + t * D, L->attn_norm, D, L->rms_eps, h + t * D);
    if ((rc = ds4_fw_attention(L, rs, rpos, h, n, y, opt))) return rc;
    if (L->steer_dir && L->steer_attn != 0.0f) ds4_fw_steer_rows(y, n, D, L->steer_dir, L->steer_attn);
    if (L->capture_attn) memcpy(L->capture_attn, y + (n - 1) * D, D * sizeof *y);
    hc_post(L, y, post, comb, streams, n);

    rc = hc_pre(L, &L->hc_ffn_fn, L->hc_ffn_scale, L->hc_ffn_base, streams, n, x_in, post, comb,
                scratch, impl);
    if (rc) return rc;
    for (size_t t = 0; t < n; t++)
        ds4_fw_rmsnorm(x_in + t * D, L->ffn_norm, D, L->rms_eps, h + t * D);
    if ((rc = ds4_fw_ffn(L, h, tokens, n, y, impl))) return rc;
    if (L->steer_dir && L->steer_ffn != 0.0f) ds4_fw_steer_rows(y, n, D, L->steer_dir, L->steer_ffn);
    if (L->capture_ffn) memcpy(L->capture_ffn, y + (n - 1) * D, D * sizeof *y);
    hc_post(L, y, post, comb, streams, n);
    (void)mix_n;
    return DS4_CPU_OK;
}

int ds4_fw_layer_forward_rows(const ds4_fw_layer *L, ds4_fw_state *const *rs,
                              const int64_t *rpos, float *streams, const int32_t *tokens,
                              size_t n, const ds4_fw_opts *opt) {
    if (L->n_hc < 1 || L->n_hc > DS4_FW_MAX_HC) return DS4_CPU_BAD_SHAPE;
    if (!ds4_cpu_dot_table(opt->impl)) return DS4_CPU_BAD_IMPL;
    size_t D = (size_t)L->n_embd, H = (size_t)L->n_hc, mix_n = 2 * H + H * H;
    size_t blk = n < BLOCK_TOKENS ? n : BLOCK_TOKENS;
    size_t per_tok = 3 * D + H + H * H + H * D + mix_n;
    size_t mark = ds4_scratch_mark();
    float *buf = ds4_scratch_alloc(blk * per_tok * sizeof *buf);
    if (!buf) return DS4_CPU_NO_MEMORY;
    int rc = DS4_CPU_OK;
    for (size_t b = 0; b < n && !rc; b += blk) {
        size_t m = n - b < blk ? n - b : blk;
        rc = layer_block(L, rs + b, rpos + b, streams + b * H * D, tokens + b, m, opt, buf);
    }
    ds4_scratch_reset(mark);
    return rc;
}

/* Per-row state and position arrays for one sequence's n consecutive positions. */
static int one_sequence_rows(ds4_fw_state *S, int64_t pos0, size_t n, ds4_fw_state ***rs,
                             int64_t **rpos) {
    *rs = ds4_scratch_alloc((n ? n : 1) * sizeof **rs);
    *rpos = ds4_scratch_alloc((n ? n : 1) * sizeof **rpos);
    if (!*rs || !*rpos) return DS4_CPU_NO_MEMORY;
    for (size_t t = 0; t < n; t++) {
        (*rs)[t] = S;
        (*rpos)[t] = pos0 + (int64_t)t;
    }
    return DS4_CPU_OK;
}

int ds4_fw_layer_forward(const ds4_fw_layer *L, ds4_fw_state *S, float *streams,
                         const int32_t *tokens, int64_t pos0, size_t n,
                         const ds4_fw_opts *opt) {
    if (!S || !S->raw) return DS4_FW_BAD_STATE;
    size_t mark = ds4_scratch_mark();
    ds4_fw_state **rs;
    int64_t *rpos;
    int rc = one_sequence_rows(S, pos0, n, &rs, &rpos);
    if (!rc) rc = ds4_fw_layer_forward_rows(L, rs, rpos, streams, tokens, n, opt);
    ds4_scratch_reset(mark);
    return rc;
}

int ds4_fw_layers_forward(const ds4_fw_layer *layers, ds4_fw_state *states, int n_layer,
                          float *streams, const int32_t *tokens, int64_t pos0, size_t n,
                          const ds4_fw_opts *opt, int *failed_layer) {
    for (int il = 0; il < n_layer; il++) {
        int rc = ds4_fw_layer_forward(&layers[il], &states[il], streams, tokens, pos0, n, opt);
        if (rc) {
            *failed_layer = il;
            return rc;
        }
    }
    return DS4_CPU_OK;
}

int ds4_fw_head_forward(const ds4_fw_head *Hd, const float *streams, size_t n, float *logits,
                        const ds4_fw_opts *opt) {
    size_t D = (size_t)Hd->n_embd, S = (size_t)Hd->n_hc, flat_n = S * D, V = Hd->output.rows;
    if (Hd->n_hc < 1 || Hd->n_hc > DS4_FW_MAX_HC) return DS4_CPU_BAD_SHAPE;
    if (Hd->hc_fn.rows != S || Hd->hc_fn.cols != flat_n || Hd->output.cols != D)
        return DS4_CPU_BAD_SHAPE;
    size_t blk = n < BLOCK_TOKENS ? n : BLOCK_TOKENS;
    size_t mark = ds4_scratch_mark();
    float *flat = ds4_scratch_alloc(flat_n * sizeof *flat);
    float *z = ds4_scratch_alloc(D * sizeof *z);
    float *zn = ds4_scratch_alloc((blk ? blk : 1) * D * sizeof *zn);
    if (!flat || !z || !zn) {
        ds4_scratch_reset(mark);
        return DS4_CPU_NO_MEMORY;
    }
    int rc = DS4_CPU_OK;
    /* the HC mix per row, then one output product per block of rows: the (large) LM head
     * is read once per block, not once per row (rows are independent products) */
    for (size_t b = 0; b < n && !rc; b += blk) {
        size_t m = n - b < blk ? n - b : blk;
        for (size_t t = 0; t < m && !rc; t++) {
            const float *X = streams + (b + t) * flat_n;
            float mix[DS4_FW_MAX_HC], w[DS4_FW_MAX_HC];
            ds4_fw_rmsnorm(X, NULL, flat_n, Hd->rms_eps, flat);
            if ((rc = ds4_fw_matmul(&Hd->hc_fn, 0, S, flat, flat_n, 1, mix, S, opt->impl))) break;
            for (size_t h = 0; h < S; h++)
                w[h] = ds4_fw_sigmoid_stable(mix[h] * Hd->hc_scale[0] + Hd->hc_base[h]) + Hd->hc_eps;
            for (size_t d = 0; d < D; d++) {
                float acc = 0.0f;
                for (size_t h = 0; h < S; h++) acc += w[h] * X[h * D + d];
                z[d] = acc;
            }
            ds4_fw_rmsnorm(z, Hd->norm, D, Hd->rms_eps, zn + t * D);
        }
        if (!rc) rc = ds4_fw_matmul(&Hd->output, 0, V, zn, D, m, logits + b * V, V, opt->impl);
    }
    ds4_scratch_reset(mark);
    return rc;
}
