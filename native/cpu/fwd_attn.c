/* The attention sublayer (docs/reference/model.md §3.3–3.7): projections for the whole block, then
 * per token in position order RoPE, KV rounding, cache push, compressor emissions, indexer
 * top-k and attention with sinks, then the grouped output projection. */
#include "cpu_pool.h"
#include "fwd_internal.h"

#define EMPTY_SCORE (-1.0e30f)

static void rope_heads(const ds4_fw_layer *L, const ds4_fw_opts *opt, float *v, int n_heads,
                       int width, int64_t pos, int inverse) {
    for (int hd = 0; hd < n_heads; hd++) {
        float *tail = v + (size_t)hd * width + (width - L->n_rot);
        if (opt->iterated_rope || !L->rope_inv_freq)
            ds4_fw_rope(tail, L->n_rot, pos, L->rope_base, L->yarn_factor, L->yarn_ramp, inverse);
        else
            ds4_fw_rope_direct(tail, L->n_rot, pos, L->rope_inv_freq, inverse);
    }
}

/* A KV row entering its cache: FP8 on the non-RoPE dims, then f16
 * (docs/reference/model.md §4.3). */
static void store_rounding(const ds4_fw_layer *L, const ds4_fw_opts *opt, float *row) {
    if (!opt->kv_rounding) return;
    ds4_fw_fp8_kv_sim(row, (size_t)(L->head_dim - L->n_rot));
    ds4_fw_f16round(row, (size_t)L->head_dim);
}

/* Pool the window ending at token p into one row (docs/reference/model.md §3.4), then normalise,
 * rotate at the window's first position and round as its cache requires. */
static int emit_row(const ds4_fw_layer *L, const ds4_fw_opts *opt, ds4_fw_comp *c, int ratio,
                    int d, const float *norm, int is_index, int64_t p) {
    if (c->n_rows >= c->rows_cap) return DS4_FW_OVERFLOW;
    size_t width = (size_t)(ratio == 4 ? 2 * d : d);
    int64_t start = p + 1 - ratio;
    int64_t oldest = ratio == 4 && start >= 4 ? start - 4 : start;
    if (oldest < c->base) return DS4_FW_BAD_STATE;  /* the window's inputs were trimmed */
    const float *kv_rows = c->kv, *sc_rows = c->score;  /* position q at row q - base */
    int64_t b = c->base;
    size_t mark = ds4_scratch_mark();
    float *pooled = ds4_scratch_alloc((size_t)d * sizeof *pooled);
    if (!pooled) return DS4_CPU_NO_MEMORY;
    for (int j = 0; j < d; j++) {
        float mx = EMPTY_SCORE;  /* an empty slot's score; max is order-free */
        if (ratio == 4) {
            for (int i = 0; i < 4; i++) {
                int64_t prev = start - 4 + i;
                if (prev >= 0) mx = fmaxf(mx, sc_rows[(size_t)(prev - b) * width + j]);
                mx = fmaxf(mx, sc_rows[(size_t)(start + i - b) * width + d + j]);
            }
        } else {
            for (int i = 0; i < ratio; i++) mx = fmaxf(mx, sc_rows[(size_t)(start + i - b) * width + j]);
        }
        if (mx <= -5e29f) {
            pooled[j] = 0.0f;
            continue;
        }
        float den = 0.0f, num = 0.0f;
        if (ratio == 4) {
            for (int i = 0; i < 4; i++) {
                int64_t prev = start - 4 + i;
                float sp = prev >= 0 ? sc_rows[(size_t)(prev - b) * width + j] : EMPTY_SCORE;
                float kp = prev >= 0 ? kv_rows[(size_t)(prev - b) * width + j] : 0.0f;
                size_t cur = (size_t)(start + i - b) * width + d + j;
                float wp = expf(sp - mx), wc = expf(sc_rows[cur] - mx);
                den += (wp + wc);
                num += wp * kp;
                num += wc * kv_rows[cur];
            }
        } else {
            for (int i = 0; i < ratio; i++) {
                size_t at = (size_t)(start + i - b) * width + j;
                float w = expf(sc_rows[at] - mx);
                den += w;
                num += w * kv_rows[at];
            }
        }
        pooled[j] = num / den;
    }
    float *row = c->rows + c->n_rows * (size_t)d;
    ds4_fw_rmsnorm(pooled, norm, (size_t)d, L->rms_eps, row);
    ds4_scratch_reset(mark);
    rope_heads(L, opt, row, 1, d, start, 0);
    if (!is_index) {
        store_rounding(L, opt, row);
    } else {
        if (opt->indexer_qat) {
            ds4_fw_hadamard128(row);
            ds4_fw_fp4_sim(row, (size_t)d);
        }
        if (opt->kv_rounding) ds4_fw_f16round(row, (size_t)d);
    }
    c->n_rows++;
    return DS4_CPU_OK;
}

typedef struct {
    const ds4_fw_layer *L;
    const ds4_fw_vec *vec;
    const float *rows, *iq, *iw;
    float *out;
} score_job;

/* score[c] = sum_hd max(0, rows[c] . iq[hd]) * w[hd], each row by one thread. */
static void score_rows(void *ctx, size_t begin, size_t end) {
    const score_job *j = ctx;
    size_t ID = (size_t)j->L->idx_dim, IH = (size_t)j->L->n_idx_head;
    for (size_t c = begin; c < end; c++) {
        const float *r = j->rows + c * ID;
        float s = 0.0f;
        for (size_t hd = 0; hd < IH; hd++)
            s += fmaxf(0.0f, j->vec->dot(r, j->iq + hd * ID, ID)) * j->iw[hd];
        j->out[c] = s;
    }
}

/* Mark the top_k compressed rows by indexer score (docs/reference/model.md §3.5); ties go to the
 * lower index, as a repeated strict-> arg-max scan in ascending order would pick them
 * (fwd_topk.c). */
static int indexer_select(const ds4_fw_layer *L, const ds4_fw_vec *vec, const ds4_fw_comp *idx,
                          const float *iq, const float *iw, unsigned char *allowed) {
    size_t n = idx->n_rows;
    size_t mark = ds4_scratch_mark();
    float *scores = ds4_scratch_alloc(n * sizeof *scores);
    if (!scores) return DS4_CPU_NO_MEMORY;
    score_job job = {L, vec, idx->rows, iq, iw, scores};
    ds4_pool_run(score_rows, &job, n, 64);
    int rc = ds4_fw_topk_mask(scores, n, (size_t)L->idx_top_k, allowed);
    ds4_scratch_reset(mark);
    return rc;
}

typedef struct {
    const ds4_fw_layer *L;
    const ds4_fw_vec *vec;
    const float *q;            /* (NH, Dh) */
    const float *raw;          /* first visible raw row */
    size_t n_raw;
    const float *comp;         /* compressed rows */
    size_t n_comp;
    const unsigned char *allowed;  /* NULL = all */
    float scale;
    float *out;                /* (NH, Dh) */
    float *scores;             /* (NH, n_raw + n_comp) scratch */
} attn_job;

static void attend_heads(void *ctx, size_t begin, size_t end) {
    const attn_job *j = ctx;
    size_t Dh = (size_t)j->L->head_dim, n_rows = j->n_raw + j->n_comp;
    for (size_t hd = begin; hd < end; hd++) {
        const float *q = j->q + hd * Dh;
        float *s = j->scores + hd * n_rows;
        float sink = j->L->sinks[hd];
        float mx = sink;
        for (size_t r = 0; r < n_rows; r++) {
            int comp = r >= j->n_raw;
            if (comp && j->allowed && !j->allowed[r - j->n_raw]) continue;
            const float *row = comp ? j->comp + (r - j->n_raw) * Dh : j->raw + r * Dh;
            s[r] = j->vec->dot(q, row, Dh) * j->scale;
            mx = fmaxf(mx, s[r]);
        }
        float den = expf(sink - mx);
        float *acc = j->out + hd * Dh;
        for (size_t i = 0; i < Dh; i++) acc[i] = 0.0f;
        for (size_t r = 0; r < n_rows; r++) {
            int comp = r >= j->n_raw;
            if (comp && j->allowed && !j->allowed[r - j->n_raw]) continue;
            const float *row = comp ? j->comp + (r - j->n_raw) * Dh : j->raw + r * Dh;
            float w = expf(s[r] - mx);
            den += w;
            j->vec->axpy(acc, w, row, Dh);
        }
        float inv = 1.0f / den;
        for (size_t i = 0; i < Dh; i++) acc[i] *= inv;
    }
}

/* Buffers of one block, carved from one scratch allocation. */
typedef struct {
    float *qr, *q, *kv, *ckv, *csc, *ikv, *isc, *iq, *iw, *heads, *seg, *part, *low, *scores;
    unsigned char *allowed;
} attn_buffers;

static int alloc_buffers(const ds4_fw_layer *L, ds4_fw_state *const *rs, size_t n,
                         attn_buffers *b) {
    size_t Dh = (size_t)L->head_dim, NH = (size_t)L->n_head, G = (size_t)L->n_groups;
    size_t cw = (size_t)(L->ratio == 4 ? 2 : 1) * Dh, iw = 2 * (size_t)L->idx_dim;
    size_t attn_cap = 0, index_cap = 0;  /* the largest state among the rows sizes scratch */
    for (size_t t = 0; t < n; t++) {
        if (rs[t]->attn.rows_cap > attn_cap) attn_cap = rs[t]->attn.rows_cap;
        if (rs[t]->index.rows_cap > index_cap) index_cap = rs[t]->index.rows_cap;
    }
    size_t max_rows = (size_t)L->n_swa + attn_cap;
    size_t counts[13] = {
        n * (size_t)L->q_rank, n * NH * Dh, n * Dh,
        L->ratio ? n * cw : 0, L->ratio ? n * cw : 0,
        L->has_indexer ? n * iw : 0, L->has_indexer ? n * iw : 0,
        L->has_indexer ? n * (size_t)(L->n_idx_head * L->idx_dim) : 0,
        L->has_indexer ? n * (size_t)L->n_idx_head : 0,
        n * NH * Dh, n * (NH * Dh / G), n * (size_t)L->o_rank, n * G * (size_t)L->o_rank,
    };
    size_t total = 0;
    for (int i = 0; i < 13; i++) total += counts[i];
    total += NH * max_rows;  /* attention scores */
    size_t allowed_n = index_cap + 1;
    float *p = ds4_scratch_alloc(total * sizeof(float) + allowed_n);
    if (!p) return DS4_CPU_NO_MEMORY;
    float **slots[13] = {&b->qr, &b->q, &b->kv, &b->ckv, &b->csc, &b->ikv, &b->isc,
                         &b->iq, &b->iw, &b->heads, &b->seg, &b->part, &b->low};
    for (int i = 0; i < 13; i++) {
        *slots[i] = p;
        p += counts[i];
    }
    b->scores = p;
    p += NH * max_rows;
    b->allowed = (unsigned char *)p;
    return DS4_CPU_OK;
}

/* Compressor inputs for the block: kv projection, and score = gate + ape[p % r]. */
static int compressor_inputs(const ds4_fw_layer *L, const ds4_fw_mat *kvm,
                             const ds4_fw_mat *gm, const float *ape, int ratio, const float *h,
                             const int64_t *rpos, size_t n, float *kv, float *sc, int impl) {
    size_t D = (size_t)L->n_embd, W = kvm->rows;
    int rc = ds4_fw_matmul(kvm, 0, W, h, D, n, kv, W, impl);
    if (!rc) rc = ds4_fw_matmul(gm, 0, W, h, D, n, sc, W, impl);
    if (rc) return rc;
    for (size_t t = 0; t < n; t++) {
        const float *a = ape + (size_t)(rpos[t] % ratio) * W;
        for (size_t i = 0; i < W; i++) sc[t * W + i] += a[i];
    }
    return DS4_CPU_OK;
}

static int push_compressor(const ds4_fw_layer *L, const ds4_fw_opts *opt, ds4_fw_comp *c,
                           int ratio, int d, const float *norm, int is_index, const float *kv,
                           const float *sc, int64_t p) {
    size_t W = (size_t)(ratio == 4 ? 2 * d : d);
    if (p < c->base) return DS4_FW_BAD_STATE;
    memcpy(c->kv + (size_t)(p - c->base) * W, kv, W * sizeof *kv);
    memcpy(c->score + (size_t)(p - c->base) * W, sc, W * sizeof *sc);
    if ((p + 1) % ratio != 0) return DS4_CPU_OK;
    return emit_row(L, opt, c, ratio, d, norm, is_index, p);
}

int ds4_fw_attention(const ds4_fw_layer *L, ds4_fw_state *const *rs, const int64_t *rpos,
                     const float *h, size_t n, float *out, const ds4_fw_opts *opt) {
    int impl = opt->impl;
    size_t D = (size_t)L->n_embd, Dh = (size_t)L->head_dim, NH = (size_t)L->n_head;
    size_t QR = (size_t)L->q_rank, G = (size_t)L->n_groups;
    size_t OR = (size_t)L->o_rank, gin = NH * Dh / G;
    size_t IH = (size_t)L->n_idx_head, ID = (size_t)L->idx_dim;
    for (size_t t = 0; t < n; t++) {
        const ds4_fw_state *S = rs[t];
        if (!S || !S->raw || (L->ratio && (!S->attn.kv || !S->attn.score || !S->attn.rows)) ||
            (L->has_indexer && (!S->index.kv || !S->index.score || !S->index.rows)))
            return DS4_FW_BAD_STATE;
    }
    /* the indexer QAT's Hadamard is 128-point; the Python open check names this first */
    if (L->has_indexer && opt->indexer_qat && ID != 128) return DS4_CPU_BAD_SHAPE;
    if (opt->kv_rounding && (Dh - (size_t)L->n_rot) % 64) return DS4_CPU_BAD_SHAPE;
    size_t mark = ds4_scratch_mark();
    attn_buffers b;
    int rc = alloc_buffers(L, rs, n, &b);
    if (rc) return rc;

    if ((rc = ds4_fw_matmul(&L->q_a, 0, QR, h, D, n, b.qr, QR, impl))) goto done;
    for (size_t t = 0; t < n; t++) ds4_fw_rmsnorm(b.qr + t * QR, L->q_a_norm, QR, L->rms_eps, b.qr + t * QR);
    if ((rc = ds4_fw_matmul(&L->q_b, 0, NH * Dh, b.qr, QR, n, b.q, NH * Dh, impl))) goto done;
    for (size_t i = 0; i < n * NH; i++) ds4_fw_rmsnorm(b.q + i * Dh, NULL, Dh, L->rms_eps, b.q + i * Dh);
    if ((rc = ds4_fw_matmul(&L->kv, 0, Dh, h, D, n, b.kv, Dh, impl))) goto done;
    for (size_t t = 0; t < n; t++) ds4_fw_rmsnorm(b.kv + t * Dh, L->kv_norm, Dh, L->rms_eps, b.kv + t * Dh);
    if (L->ratio &&
        (rc = compressor_inputs(L, &L->comp_kv, &L->comp_gate, L->comp_ape, L->ratio, h, rpos, n,
                                b.ckv, b.csc, impl)))
        goto done;
    int need_index = 0;
    if (L->has_indexer) {
        if ((rc = compressor_inputs(L, &L->idx_kv, &L->idx_gate, L->idx_ape, 4, h, rpos, n, b.ikv,
                                    b.isc, impl)))
            goto done;
        /* The indexer's projections only matter once more rows exist than it keeps (a row
         * selects only when its own state holds more; computing them for every row of
         * the block changes no row's result). */
        for (size_t t = 0; t < n && !need_index; t++)
            need_index = (size_t)((rpos[t] + 1) / 4) > (size_t)L->idx_top_k;
        if (need_index) {
            if ((rc = ds4_fw_matmul(&L->idx_q_b, 0, IH * ID, b.qr, QR, n, b.iq, IH * ID, impl)) ||
                (rc = ds4_fw_matmul(&L->idx_proj, 0, IH, h, D, n, b.iw, IH, impl)))
                goto done;
            float wscale = 1.0f / sqrtf((float)(ID * IH));
            for (size_t i = 0; i < n * IH; i++) b.iw[i] = b.iw[i] * wscale;
        }
    }

    float scale = 1.0f / sqrtf((float)Dh);
    const ds4_fw_vec *vec = ds4_fw_vec_for(impl);
    for (size_t t = 0; t < n; t++) {
        int64_t p = rpos[t];
        ds4_fw_state *S = rs[t];
        float *q = b.q + t * NH * Dh, *kv = b.kv + t * Dh;
        rope_heads(L, opt, q, (int)NH, (int)Dh, p, 0);
        rope_heads(L, opt, kv, 1, (int)Dh, p, 0);
        store_rounding(L, opt, kv);
        if (p < S->raw_base) { rc = DS4_FW_BAD_STATE; goto done; }
        memcpy(S->raw + (size_t)(p - S->raw_base) * Dh, kv, Dh * sizeof *kv);
        if (L->ratio) {
            size_t W = (size_t)(L->ratio == 4 ? 2 : 1) * Dh;
            rc = push_compressor(L, opt, &S->attn, L->ratio, (int)Dh, L->comp_norm, 0,
                                 b.ckv + t * W, b.csc + t * W, p);
            if (rc) goto done;
        }
        const unsigned char *allowed = NULL;
        if (L->has_indexer) {
            rc = push_compressor(L, opt, &S->index, 4, (int)ID, L->idx_norm, 1, b.ikv + t * 2 * ID,
                                 b.isc + t * 2 * ID, p);
            if (rc) goto done;
            if (S->attn.n_rows > (size_t)L->idx_top_k && need_index) {
                float *iq = b.iq + t * IH * ID;
                rope_heads(L, opt, iq, (int)IH, (int)ID, p, 0);
                for (size_t hd = 0; hd < IH && opt->indexer_qat; hd++) {
                    ds4_fw_hadamard128(iq + hd * ID);
                    ds4_fw_fp4_sim(iq + hd * ID, ID);
                }
                rc = indexer_select(L, vec, &S->index, iq, b.iw + t * IH, b.allowed);
                if (rc) goto done;
                allowed = b.allowed;
            }
        }
        int64_t first = p + 1 - L->n_swa > 0 ? p + 1 - L->n_swa : 0;
        if (first < S->raw_base && L->window_from_kept) first = S->raw_base;
        if (first < S->raw_base) { rc = DS4_FW_BAD_STATE; goto done; }
        attn_job job = {L, vec, q, S->raw + (size_t)(first - S->raw_base) * Dh,
                        (size_t)(p + 1 - first),
                        L->ratio ? S->attn.rows : NULL, L->ratio ? S->attn.n_rows : 0,
                        allowed, scale, b.heads + t * NH * Dh, b.scores};
        /* few rows: the calling thread alone beats waking the pool */
        size_t work = NH * Dh * (job.n_raw + job.n_comp);
        ds4_pool_run(attend_heads, &job, NH, work < 64 * 1024 ? NH : 1);
        rope_heads(L, opt, b.heads + t * NH * Dh, (int)NH, (int)Dh, p, 1);
    }

    for (size_t g = 0; g < G; g++) {
        for (size_t t = 0; t < n; t++)
            memcpy(b.seg + t * gin, b.heads + t * NH * Dh + g * gin, gin * sizeof(float));
        if ((rc = ds4_fw_matmul(&L->out_a, g * OR, OR, b.seg, gin, n, b.part, OR, impl)))
            goto done;
        for (size_t t = 0; t < n; t++)
            memcpy(b.low + t * G * OR + g * OR, b.part + t * OR, OR * sizeof(float));
    }
    rc = ds4_fw_matmul(&L->out_b, 0, D, b.low, G * OR, n, out, D, impl);
done:
    ds4_scratch_reset(mark);
    return rc;
}
