/* The per-sequence state of the native forward (ds4_seq.h): growable row arrays per
 * layer, their bookkeeping (truncate, trim, history checks) and the ds4_fw_state views
 * the layer kernels write through. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "ds4_seq.h"

#define INITIAL_ROWS 16

/* Rows base..n-1 of `width` floats; row p at data[(p - base) * width]; cap rows fit. */
typedef struct {
    float *data;
    size_t width, cap;
    int64_t base, n;
} rows_t;

typedef struct {
    int ratio;
    rows_t kv, score, rows;  /* rows: emitted rows, never trimmed (base 0) */
} comp_t;

typedef struct {
    rows_t raw;
    comp_t attn, index;
    int has_attn, has_index;
} layer_t;

struct ds4_fw_seq {
    int n_layer, n_swa;
    int64_t len;
    layer_t *layers;
    ds4_fw_state *views;  /* what the kernels see; refreshed before each forward */
};

static int reserve(rows_t *r, int64_t end) {
    size_t need = end > r->base ? (size_t)(end - r->base) : 0;
    if (need <= r->cap) return DS4_CPU_OK;
    size_t cap = r->cap ? 2 * r->cap : INITIAL_ROWS;
    if (cap < need) cap = need;
    float *grown = realloc(r->data, cap * r->width * sizeof *grown);
    if (!grown) return DS4_CPU_NO_MEMORY;
    r->data = grown;
    r->cap = cap;
    return DS4_CPU_OK;
}

static void truncate_rows(rows_t *r, int64_t n) {
    if (n < r->n) r->n = n > r->base ? n : r->base;
}

static int trim_rows(rows_t *r, int64_t keep_from) {
    if (keep_from > r->n) keep_from = r->n;
    int64_t drop = keep_from - r->base;
    if (drop <= 0 || (size_t)drop < r->cap / 2) return 0;
    size_t kept = (size_t)(r->n - keep_from);
    memmove(r->data, r->data + (size_t)drop * r->width, kept * r->width * sizeof *r->data);
    r->base = keep_from;
    return 1;
}

/* A copy sized to the rows in use, not the source's spare capacity: a clone is a
 * checkpoint kept in memory (its bytes count against a budget) or a restored state,
 * which grows again as any state does. */
static int clone_rows(rows_t *dst, const rows_t *src) {
    size_t used = (size_t)(src->n - src->base);
    *dst = *src;
    dst->data = NULL;
    dst->cap = used;
    if (!used) return DS4_CPU_OK;
    dst->data = malloc(used * src->width * sizeof *dst->data);
    if (!dst->data) return DS4_CPU_NO_MEMORY;
    memcpy(dst->data, src->data, used * src->width * sizeof *src->data);
    return DS4_CPU_OK;
}

/* First position whose compressor inputs the frontier after n positions still holds
 * (docs/reference/model.md §3.4: ratio 4 overlaps the previous window). */
static int64_t frontier_start(int ratio, int64_t n) {
    if (ratio == 4) return 4 * (n / 4) - 4 > 0 ? 4 * (n / 4) - 4 : 0;
    return n - n % ratio;
}

static void init_comp(comp_t *c, int ratio, size_t row_width) {
    size_t lanes = ratio == 4 ? 2 : 1;
    c->ratio = ratio;
    c->kv.width = c->score.width = lanes * row_width;
    c->rows.width = row_width;
}

ds4_fw_seq *ds4_fw_seq_new(const ds4_fw_layer *layers, int n_layer) {
    if (n_layer < 1) return NULL;
    ds4_fw_seq *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->layers = calloc((size_t)n_layer, sizeof *s->layers);
    s->views = calloc((size_t)n_layer, sizeof *s->views);
    if (!s->layers || !s->views) {
        free(s->layers), free(s->views), free(s);
        return NULL;
    }
    s->n_layer = n_layer;
    s->n_swa = layers[0].n_swa;
    for (int il = 0; il < n_layer; il++) {
        const ds4_fw_layer *L = &layers[il];
        layer_t *l = &s->layers[il];
        l->raw.width = (size_t)L->head_dim;
        l->has_attn = L->ratio != 0;
        l->has_index = L->has_indexer != 0;
        if (l->has_attn) init_comp(&l->attn, L->ratio, (size_t)L->head_dim);
        if (l->has_index) init_comp(&l->index, 4, (size_t)L->idx_dim);
    }
    return s;
}

/* The seven arrays of a layer, in DS4_SEQ_* order. */
static void all_arrays(layer_t *l, rows_t **out) {
    rows_t *list[7] = {&l->raw, &l->attn.kv, &l->attn.score, &l->attn.rows,
                       &l->index.kv, &l->index.score, &l->index.rows};
    memcpy(out, list, sizeof list);
}

void ds4_fw_seq_free(ds4_fw_seq *s) {
    if (!s) return;
    for (int il = 0; il < s->n_layer; il++) {
        rows_t *arr[7];
        all_arrays(&s->layers[il], arr);
        for (int k = 0; k < 7; k++) free(arr[k]->data);
    }
    free(s->layers), free(s->views), free(s);
}

ds4_fw_seq *ds4_fw_seq_clone(const ds4_fw_seq *s) {
    ds4_fw_seq *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_layer = s->n_layer;
    c->n_swa = s->n_swa;
    c->len = s->len;
    c->layers = calloc((size_t)s->n_layer, sizeof *c->layers);
    c->views = calloc((size_t)s->n_layer, sizeof *c->views);
    if (!c->layers || !c->views) {
        ds4_fw_seq_free(c);
        return NULL;
    }
    for (int il = 0; il < s->n_layer; il++) {
        layer_t *dst = &c->layers[il];
        *dst = s->layers[il];
        rows_t *from[7], *to[7];
        all_arrays((layer_t *)&s->layers[il], from);
        all_arrays(dst, to);
        for (int k = 0; k < 7; k++) to[k]->data = NULL;  /* a failed clone frees only its own */
        for (int k = 0; k < 7; k++) {
            if (clone_rows(to[k], from[k])) {
                ds4_fw_seq_free(c);
                return NULL;
            }
        }
    }
    return c;
}

int64_t ds4_fw_seq_len(const ds4_fw_seq *s) { return s->len; }

size_t ds4_fw_seq_bytes(const ds4_fw_seq *s) {
    size_t total = 0;
    for (int il = 0; il < s->n_layer; il++) {
        rows_t *arr[7];
        all_arrays(&s->layers[il], arr);
        for (int k = 0; k < 7; k++) total += arr[k]->cap * arr[k]->width * sizeof(float);
    }
    return total;
}

static int reserve_comp(comp_t *c, int64_t end) {
    int rc = reserve(&c->kv, end);
    if (!rc) rc = reserve(&c->score, end);
    /* the forward appends at most one row per `ratio` positions */
    if (!rc) rc = reserve(&c->rows, end / c->ratio + 1);
    return rc;
}

static void view_comp(ds4_fw_comp *v, const comp_t *c) {
    v->kv = c->kv.data;
    v->score = c->score.data;
    v->base = c->kv.base;
    v->rows = c->rows.data;
    v->n_rows = (size_t)c->rows.n;
    v->rows_cap = c->rows.cap;
}

/* Room for `n` more positions and fresh kernel views of every layer. */
static int prepare(ds4_fw_seq *s, size_t n, int *failed_layer) {
    int64_t end = s->len + (int64_t)n;
    for (int il = 0; il < s->n_layer; il++) {
        layer_t *l = &s->layers[il];
        int rc = reserve(&l->raw, end);
        if (!rc && l->has_attn) rc = reserve_comp(&l->attn, end);
        if (!rc && l->has_index) rc = reserve_comp(&l->index, end);
        if (rc) {
            *failed_layer = il;
            return rc;
        }
        ds4_fw_state *v = &s->views[il];
        memset(v, 0, sizeof *v);
        v->raw = l->raw.data;
        v->raw_base = l->raw.base;
        if (l->has_attn) view_comp(&v->attn, &l->attn);
        if (l->has_index) view_comp(&v->index, &l->index);
    }
    return DS4_CPU_OK;
}

/* After a successful pass: the row counts the kernels advanced become the state's. */
static void commit(ds4_fw_seq *s, size_t n) {
    int64_t end = s->len + (int64_t)n;
    for (int il = 0; il < s->n_layer; il++) {
        layer_t *l = &s->layers[il];
        l->raw.n = end;
        if (l->has_attn) {
            l->attn.kv.n = l->attn.score.n = end;
            l->attn.rows.n = (int64_t)s->views[il].attn.n_rows;
        }
        if (l->has_index) {
            l->index.kv.n = l->index.score.n = end;
            l->index.rows.n = (int64_t)s->views[il].index.n_rows;
        }
    }
    s->len = end;
}

int ds4_fw_seqs_forward(ds4_fw_seq *const *seqs, const size_t *counts, size_t n_seqs,
                        const ds4_fw_layer *layers, float *streams, const int32_t *tokens,
                        const ds4_fw_opts *opt, int *failed_layer) {
    *failed_layer = 0;
    if (n_seqs == 0) return DS4_CPU_OK;
    size_t total = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        if (!seqs[i] || seqs[i]->n_layer != seqs[0]->n_layer) return DS4_FW_BAD_STATE;
        for (size_t j = 0; j < i; j++)
            if (seqs[j] == seqs[i]) return DS4_FW_BAD_STATE;  /* one pass per sequence */
        total += counts[i];
    }
    if (total == 0) return DS4_CPU_OK;
    for (size_t i = 0; i < n_seqs; i++) {
        int rc = prepare(seqs[i], counts[i], failed_layer);
        if (rc) return rc;
    }
    size_t mark = ds4_scratch_mark();
    ds4_fw_state **rs = ds4_scratch_alloc(total * sizeof *rs);
    int64_t *rpos = ds4_scratch_alloc(total * sizeof *rpos);
    int rc = rs && rpos ? DS4_CPU_OK : DS4_CPU_NO_MEMORY;
    for (size_t i = 0, row = 0; !rc && i < n_seqs; i++)
        for (size_t t = 0; t < counts[i]; t++) rpos[row++] = seqs[i]->len + (int64_t)t;
    for (int il = 0; !rc && il < seqs[0]->n_layer; il++) {
        for (size_t i = 0, row = 0; i < n_seqs; i++)
            for (size_t t = 0; t < counts[i]; t++) rs[row++] = &seqs[i]->views[il];
        rc = ds4_fw_layer_forward_rows(&layers[il], rs, rpos, streams, tokens, total, opt);
        if (rc) *failed_layer = il;
    }
    ds4_scratch_reset(mark);
    if (rc) return rc;  /* row counts were not advanced: every state is as it was */
    for (size_t i = 0; i < n_seqs; i++) commit(seqs[i], counts[i]);
    return DS4_CPU_OK;
}

int ds4_fw_seq_forward(ds4_fw_seq *s, const ds4_fw_layer *layers, float *streams,
                       const int32_t *tokens, size_t n, const ds4_fw_opts *opt,
                       int *failed_layer) {
    return ds4_fw_seqs_forward(&s, &n, 1, layers, streams, tokens, opt, failed_layer);
}

static void truncate_comp(comp_t *c, int64_t n) {
    truncate_rows(&c->kv, n);
    truncate_rows(&c->score, n);
    truncate_rows(&c->rows, n / c->ratio);
}

void ds4_fw_seq_truncate(ds4_fw_seq *s, int64_t n) {
    if (n < 0) n = 0;
    if (n >= s->len) return;
    for (int il = 0; il < s->n_layer; il++) {
        layer_t *l = &s->layers[il];
        truncate_rows(&l->raw, n);
        if (l->has_attn) truncate_comp(&l->attn, n);
        if (l->has_index) truncate_comp(&l->index, n);
    }
    s->len = n;
}

static int trim_comp(comp_t *c, int64_t keep_from, int64_t n) {
    int64_t frontier = frontier_start(c->ratio, n);
    int64_t k = keep_from < frontier ? keep_from : frontier;
    int moved = trim_rows(&c->kv, k);
    moved |= trim_rows(&c->score, k);
    return moved;
}

int ds4_fw_seq_trim(ds4_fw_seq *s, int64_t keep_from) {
    int moved = 0;
    int64_t n = s->len;
    int64_t window_start = n - (n < s->n_swa ? n : s->n_swa);
    for (int il = 0; il < s->n_layer; il++) {
        layer_t *l = &s->layers[il];
        moved |= trim_rows(&l->raw, keep_from < window_start ? keep_from : window_start);
        if (l->has_attn) moved |= trim_comp(&l->attn, keep_from, n);
        if (l->has_index) moved |= trim_comp(&l->index, keep_from, n);
    }
    return moved;
}

static int comp_history_ok(const comp_t *c, int64_t m) {
    int64_t need = frontier_start(c->ratio, m);
    return !(need < m && need < c->kv.base);
}

int ds4_fw_seq_history_ok(const ds4_fw_seq *s, int64_t m) {
    int64_t first_visible = m + 1 - s->n_swa > 0 ? m + 1 - s->n_swa : 0;
    for (int il = 0; il < s->n_layer; il++) {
        const layer_t *l = &s->layers[il];
        if (first_visible < l->raw.base) return 0;
        if (l->has_attn && !comp_history_ok(&l->attn, m)) return 0;
        if (l->has_index && !comp_history_ok(&l->index, m)) return 0;
    }
    return 1;
}

static rows_t *array_of(const ds4_fw_seq *s, int layer, int which) {
    if (layer < 0 || layer >= s->n_layer || which < DS4_SEQ_RAW || which > DS4_SEQ_INDEX_ROWS)
        return NULL;
    layer_t *l = &s->layers[layer];
    if (which >= DS4_SEQ_ATTN_KV && which <= DS4_SEQ_ATTN_ROWS && !l->has_attn) return NULL;
    if (which >= DS4_SEQ_INDEX_KV && !l->has_index) return NULL;
    rows_t *arr[7];
    all_arrays(l, arr);
    return arr[which];
}

const float *ds4_fw_seq_rows(const ds4_fw_seq *s, int layer, int which, int64_t *base,
                             int64_t *n, size_t *width) {
    rows_t *r = array_of(s, layer, which);
    if (!r) {
        *base = *n = 0;
        *width = 0;
        return NULL;
    }
    *base = r->base;
    *n = r->n;
    *width = r->width;
    return r->data;
}

int ds4_fw_seq_set_rows(ds4_fw_seq *s, int layer, int which, int64_t start,
                        const float *rows, size_t count) {
    rows_t *r = array_of(s, layer, which);
    if (!r || start < 0) return DS4_FW_BAD_STATE;
    if (r->n == r->base) r->base = r->n = start;
    if (start < r->base) return DS4_FW_BAD_STATE;
    int64_t end = start + (int64_t)count;
    int64_t old_end = r->n;
    if (reserve(r, end)) return DS4_CPU_NO_MEMORY;
    if (start > old_end)
        memset(r->data + (size_t)(old_end - r->base) * r->width, 0,
               (size_t)(start - old_end) * r->width * sizeof *r->data);
    if (count)
        memcpy(r->data + (size_t)(start - r->base) * r->width, rows, count * r->width * sizeof *rows);
    r->n = end;
    return DS4_CPU_OK;
}

void ds4_fw_seq_set_len(ds4_fw_seq *s, int64_t n) { s->len = n; }
