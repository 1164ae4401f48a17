/* The indexer's top-k (docs/adr/0031): mark the k highest of n scores, equal scores
 * to the lower index (what a repeated strict-> arg-max scan in ascending order picks),
 * NaN below every number (as the reference's stable argsort places it).
 *
 * ds4_fw_topk_mask keeps a bounded heap of the k best seen so far while scanning in
 * index order, so most rows cost one integer compare with the heap's worst entry:
 * O(n + k log k log(n/k)) on typical scores, O(n log k) at worst, where a full sort
 * (ds4_fw_topk_mask_fullsort, the plain form kept for tests and the bench) is
 * O(n log n). The two pick the same set for every NaN-free input. */
#include <stdlib.h>

#include "fwd_internal.h"

/* A key with the scores' order: larger score, larger key; -0 equals +0; every NaN
 * below -inf. Distinct finite scores keep distinct keys (the map is monotone on the
 * bit patterns). */
static inline int32_t score_key(float s) {
    if (s != s) return INT32_MIN;
    if (s == 0.0f) return 0;
    int32_t b;
    memcpy(&b, &s, sizeof b);
    return b >= 0 ? b : (int32_t)(b ^ 0x7fffffff);  /* negatives: larger magnitude lower */
}

typedef struct {
    int32_t key;
    uint32_t index;
} ranked;

/* a ranks after b: lower key, or the same key at a higher index. */
static inline int worse(ranked a, ranked b) {
    return a.key < b.key || (a.key == b.key && a.index > b.index);
}

/* Restore the heap (the worst entry at 0) below slot i. */
static void sift_down(ranked *h, size_t m, size_t i) {
    ranked x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && worse(h[c + 1], h[c])) c++;
        if (!worse(h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

int ds4_fw_topk_mask(const float *scores, size_t n, size_t k, unsigned char *allowed) {
    if (k >= n) {
        memset(allowed, 1, n);
        return DS4_CPU_OK;
    }
    memset(allowed, 0, n);
    if (k == 0) return DS4_CPU_OK;
    if (n > UINT32_MAX) return DS4_CPU_BAD_SHAPE;
    size_t mark = ds4_scratch_mark();
    ranked *h = ds4_scratch_alloc(k * sizeof *h);
    if (!h) return DS4_CPU_NO_MEMORY;
    for (size_t i = 0; i < k; i++) h[i] = (ranked){score_key(scores[i]), (uint32_t)i};
    for (size_t i = k / 2; i-- > 0;) sift_down(h, k, i);
    /* Rows come in ascending index, so a newcomer beats the worst kept entry exactly
     * when its key is strictly higher (an equal key loses on its higher index). */
    int32_t floor = h[0].key;
    for (size_t i = k; i < n; i++) {
        int32_t key = score_key(scores[i]);
        if (key <= floor) continue;
        h[0] = (ranked){key, (uint32_t)i};
        sift_down(h, k, 0);
        floor = h[0].key;
    }
    for (size_t i = 0; i < k; i++) allowed[h[i].index] = 1;
    ds4_scratch_reset(mark);
    return DS4_CPU_OK;
}

/* The previous form, kept for tests and the bench: (score, index) pairs, qsort by
 * score then index. Its comparator is only a total order on NaN-free scores. */
typedef struct {
    float score;
    size_t index;
} scored_row;

static int by_score_then_index(const void *a, const void *b) {
    const scored_row *x = a, *y = b;
    if (x->score > y->score) return -1;
    if (x->score < y->score) return 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int ds4_fw_topk_mask_fullsort(const float *scores, size_t n, size_t k, unsigned char *allowed) {
    size_t mark = ds4_scratch_mark();
    scored_row *rows = ds4_scratch_alloc(n * sizeof *rows);
    if (!rows) return DS4_CPU_NO_MEMORY;
    for (size_t i = 0; i < n; i++) rows[i] = (scored_row){scores[i], i};
    qsort(rows, n, sizeof *rows, by_score_then_index);
    memset(allowed, 0, n);
    for (size_t i = 0; i < k && i < n; i++) allowed[rows[i].index] = 1;
    ds4_scratch_reset(mark);
    return DS4_CPU_OK;
}
