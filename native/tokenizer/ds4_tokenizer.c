/* Added-token split and byte-level BPE merging; see ds4_tokenizer.h. */
#include "ds4_tokenizer.h"

#include <string.h>

#include "ds4_pretokenize.h"

#define EMPTY_KEY UINT64_MAX

typedef struct {
    uint64_t key; /* left id << 32 | right id */
    int32_t rank;
    int32_t result;
} merge_slot;

/* One matching pass over added tokens: leftmost-longest by trying each distinct
 * token length, longest first, in a hash set of the token bytes. */
typedef struct {
    int32_t n;
    uint8_t *text;
    int64_t *off; /* token i is text[off[i] .. off[i+1]) */
    int32_t *ids;
    int32_t *slots; /* token index or -1; size mask + 1 */
    uint64_t mask;
    int64_t *lengths; /* distinct lengths, descending */
    int32_t n_lengths;
    uint8_t first[32]; /* bitmap of first bytes */
} added_pass;

struct ds4_tokenizer {
    int32_t byte_ids[256];
    merge_slot *merges;
    uint64_t merge_mask;
    added_pass passes[2]; /* early, then the rest inside the gaps */
};

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const uint8_t *s, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return mix64(h);
}

static uint64_t pow2_at_least(uint64_t n) {
    uint64_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

static const merge_slot *find_merge(const ds4_tokenizer *tok, int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint64_t i = mix64(key) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        const merge_slot *s = &tok->merges[i];
        if (s->key == key) return s;
        if (s->key == EMPTY_KEY) return NULL;
    }
}

static int build_merges(ds4_tokenizer *tok, int32_t n, const int32_t *left, const int32_t *right,
                        const int32_t *result) {
    uint64_t size = pow2_at_least((uint64_t)n * 2 + 1);
    tok->merges = malloc(size * sizeof *tok->merges);
    if (!tok->merges) return -1;
    tok->merge_mask = size - 1;
    for (uint64_t i = 0; i < size; i++) tok->merges[i].key = EMPTY_KEY;
    for (int32_t r = 0; r < n; r++) {
        if (left[r] < 0 || right[r] < 0 || result[r] < 0) return -1;
        uint64_t key = (uint64_t)(uint32_t)left[r] << 32 | (uint32_t)right[r];
        uint64_t i = mix64(key) & tok->merge_mask;
        while (tok->merges[i].key != EMPTY_KEY && tok->merges[i].key != key)
            i = (i + 1) & tok->merge_mask;
        tok->merges[i] = (merge_slot){key, r, result[r]}; /* a repeated pair: last rank wins */
    }
    return 0;
}

static int build_pass(added_pass *p, int32_t n_added, const uint8_t *text, const int64_t *off,
                      const int32_t *ids, const uint8_t *early, int want_early) {
    int32_t n = 0;
    int64_t bytes = 0;
    for (int32_t i = 0; i < n_added; i++) {
        if ((early[i] != 0) != want_early) continue;
        if (off[i + 1] <= off[i]) return -1;
        n++;
        bytes += off[i + 1] - off[i];
    }
    uint64_t size = pow2_at_least((uint64_t)n * 2 + 1);
    p->text = malloc((size_t)bytes + 1);
    p->off = malloc(((size_t)n + 1) * sizeof *p->off);
    p->ids = malloc(((size_t)n + 1) * sizeof *p->ids);
    p->lengths = malloc(((size_t)n + 1) * sizeof *p->lengths);
    p->slots = malloc(size * sizeof *p->slots);
    if (!p->text || !p->off || !p->ids || !p->lengths || !p->slots) return -1;
    p->mask = size - 1;
    for (uint64_t i = 0; i < size; i++) p->slots[i] = -1;
    p->off[0] = 0;
    for (int32_t i = 0; i < n_added; i++) {
        if ((early[i] != 0) != want_early) continue;
        int64_t len = off[i + 1] - off[i];
        int32_t k = p->n++;
        memcpy(p->text + p->off[k], text + off[i], (size_t)len);
        p->off[k + 1] = p->off[k] + len;
        p->ids[k] = ids[i];
        p->first[text[off[i]] >> 3] |= (uint8_t)(1u << (text[off[i]] & 7));
        uint64_t s = hash_bytes(text + off[i], len) & p->mask;
        while (p->slots[s] >= 0) s = (s + 1) & p->mask;
        p->slots[s] = k;
        int32_t j = p->n_lengths;
        int seen = 0;
        for (int32_t m = 0; m < j; m++) seen |= p->lengths[m] == len;
        if (!seen) {
            while (j > 0 && p->lengths[j - 1] < len) { /* keep descending order */
                p->lengths[j] = p->lengths[j - 1];
                j--;
            }
            p->lengths[j] = len;
            p->n_lengths++;
        }
    }
    return 0;
}

ds4_tokenizer *ds4_tok_create(const int32_t *byte_ids, int32_t n_merges,
                              const int32_t *merge_left, const int32_t *merge_right,
                              const int32_t *merge_result, int32_t n_added,
                              const uint8_t *added_text, const int64_t *added_offsets,
                              const int32_t *added_ids, const uint8_t *added_early) {
    ds4_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return NULL;
    for (int b = 0; b < 256; b++) {
        if (byte_ids[b] < 0) {
            ds4_tok_destroy(tok);
            return NULL;
        }
        tok->byte_ids[b] = byte_ids[b];
    }
    if (n_merges < 0 || n_added < 0 ||
        build_merges(tok, n_merges, merge_left, merge_right, merge_result) ||
        build_pass(&tok->passes[0], n_added, added_text, added_offsets, added_ids, added_early,
                   1) ||
        build_pass(&tok->passes[1], n_added, added_text, added_offsets, added_ids, added_early,
                   0)) {
        ds4_tok_destroy(tok);
        return NULL;
    }
    return tok;
}

void ds4_tok_destroy(ds4_tokenizer *tok) {
    if (!tok) return;
    free(tok->merges);
    for (int k = 0; k < 2; k++) {
        added_pass *p = &tok->passes[k];
        free(p->text);
        free(p->off);
        free(p->ids);
        free(p->slots);
        free(p->lengths);
    }
    free(tok);
}

/* Index of the longest token of pass `p` starting at s[0], or -1. */
static int32_t match_added(const added_pass *p, const uint8_t *s, int64_t avail) {
    if (!(p->first[s[0] >> 3] & (1u << (s[0] & 7)))) return -1;
    for (int32_t m = 0; m < p->n_lengths; m++) {
        int64_t len = p->lengths[m];
        if (len > avail) continue;
        for (uint64_t i = hash_bytes(s, len) & p->mask; p->slots[i] >= 0; i = (i + 1) & p->mask) {
            int32_t k = p->slots[i];
            if (p->off[k + 1] - p->off[k] == len && !memcmp(p->text + p->off[k], s, (size_t)len))
                return k;
        }
    }
    return -1;
}

/* Per-call memo of piece bytes -> ids: words repeat, and the merge table does not
 * fit in cache, so a hit saves most of the work. Per call keeps encode re-entrant. */
typedef struct {
    uint64_t hash;
    int64_t key; /* offset into keys */
    int64_t ids; /* offset into id_arena */
    int32_t key_len;
    int32_t n_ids;
} memo_entry;

typedef struct {
    int32_t *slots; /* entry index or -1 */
    uint64_t mask;
    memo_entry *entries;
    int64_t n, entries_cap;
    uint8_t *keys;
    int64_t keys_len, keys_cap;
    int32_t *id_arena;
    int64_t ids_len, ids_cap;
} memo;

#define MEMO_MAX_SLOTS (1u << 20)
#define MEMO_MAX_KEY 64

typedef struct {
    const ds4_tokenizer *tok;
    const uint8_t *segment; /* plain text being pre-tokenized */
    memo memo;
    ds4_pt_text pt;
    int32_t *out;
    int64_t count;
    int32_t *sym; /* BPE workspace, one slot per byte of the piece */
    int32_t *next;
    int32_t *prev;
    uint64_t *heap; /* rank << 32 | position */
    int64_t cap;
} encoder;

static void heap_push(uint64_t *h, int64_t *n, uint64_t v) {
    int64_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, int64_t *n) {
    uint64_t top = h[0], last = h[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= last) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(encoder *e, int64_t *hn, int32_t pos, int32_t right) {
    const merge_slot *m = find_merge(e->tok, e->sym[pos], e->sym[right]);
    if (m) heap_push(e->heap, hn, (uint64_t)(uint32_t)m->rank << 32 | (uint32_t)pos);
}

static int grow(void **buf, int64_t *cap, int64_t need, size_t item) {
    if (need <= *cap) return 0;
    int64_t cap2 = *cap ? *cap : 256;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*buf, (size_t)cap2 * item);
    if (!p) return -1;
    *buf = p;
    *cap = cap2;
    return 0;
}

static int memo_rehash(memo *c, uint64_t size) {
    int32_t *slots = malloc(size * sizeof *slots);
    if (!slots) return -1;
    for (uint64_t i = 0; i < size; i++) slots[i] = -1;
    for (int64_t k = 0; k < c->n; k++) {
        uint64_t i = c->entries[k].hash & (size - 1);
        while (slots[i] >= 0) i = (i + 1) & (size - 1);
        slots[i] = (int32_t)k;
    }
    free(c->slots);
    c->slots = slots;
    c->mask = size - 1;
    return 0;
}

/* Slot for (hash, key): holds the entry index on a hit, -1 on a miss. */
static uint64_t memo_find(const memo *c, uint64_t hash, const uint8_t *s, int64_t m) {
    uint64_t i = hash & c->mask;
    for (; c->slots[i] >= 0; i = (i + 1) & c->mask) {
        const memo_entry *en = &c->entries[c->slots[i]];
        if (en->hash == hash && en->key_len == m && !memcmp(c->keys + en->key, s, (size_t)m))
            break;
    }
    return i;
}

static void memo_free(memo *c) {
    free(c->slots);
    free(c->entries);
    free(c->keys);
    free(c->id_arena);
}

static int bpe_merge(encoder *e, const uint8_t *s, int64_t m);

/* BPE one piece through the memo (short multi-byte pieces only). */
static int bpe_piece(encoder *e, const uint8_t *s, int64_t m) {
    if (m == 1) {
        e->out[e->count++] = e->tok->byte_ids[s[0]];
        return 0;
    }
    memo *c = &e->memo;
    if (m > MEMO_MAX_KEY) return bpe_merge(e, s, m);
    if (!c->slots && memo_rehash(c, 1024)) return -1;
    uint64_t hash = hash_bytes(s, m);
    uint64_t slot = memo_find(c, hash, s, m);
    if (c->slots[slot] >= 0) {
        const memo_entry *en = &c->entries[c->slots[slot]];
        memcpy(e->out + e->count, c->id_arena + en->ids, (size_t)en->n_ids * sizeof(int32_t));
        e->count += en->n_ids;
        return 0;
    }
    int64_t first = e->count;
    if (bpe_merge(e, s, m)) return -1;
    int64_t n_ids = e->count - first;
    if ((uint64_t)(c->n + 1) * 2 > c->mask + 1) {
        if (c->mask + 1 >= MEMO_MAX_SLOTS) return 0; /* full: stop remembering */
        if (memo_rehash(c, (c->mask + 1) * 2)) return -1;
        slot = memo_find(c, hash, s, m);
    }
    if (grow((void **)&c->entries, &c->entries_cap, c->n + 1, sizeof *c->entries) ||
        grow((void **)&c->keys, &c->keys_cap, c->keys_len + m, 1) ||
        grow((void **)&c->id_arena, &c->ids_cap, c->ids_len + n_ids, sizeof(int32_t)))
        return -1;
    memcpy(c->keys + c->keys_len, s, (size_t)m);
    memcpy(c->id_arena + c->ids_len, e->out + first, (size_t)n_ids * sizeof(int32_t));
    c->entries[c->n] = (memo_entry){hash, c->keys_len, c->ids_len, (int32_t)m, (int32_t)n_ids};
    c->slots[slot] = (int32_t)c->n++;
    c->keys_len += m;
    c->ids_len += n_ids;
    return 0;
}

/* Merge the bytes of one piece, lowest rank first, leftmost among equal ranks. */
static int bpe_merge(encoder *e, const uint8_t *s, int64_t m) {
    const int32_t *byte_ids = e->tok->byte_ids;
    if (m > e->cap) {
        int64_t cap = m > 2 * e->cap ? m : 2 * e->cap;
        int32_t *sym = realloc(e->sym, (size_t)cap * sizeof *sym);
        if (sym) e->sym = sym;
        int32_t *next = realloc(e->next, (size_t)cap * sizeof *next);
        if (next) e->next = next;
        int32_t *prev = realloc(e->prev, (size_t)cap * sizeof *prev);
        if (prev) e->prev = prev;
        uint64_t *heap = realloc(e->heap, (size_t)cap * 2 * sizeof *heap);
        if (heap) e->heap = heap;
        if (!sym || !next || !prev || !heap) return -1;
        e->cap = cap;
    }
    int32_t n = (int32_t)m;
    for (int32_t i = 0; i < n; i++) {
        e->sym[i] = byte_ids[s[i]];
        e->next[i] = i + 1;
        e->prev[i] = i - 1;
    }
    int64_t hn = 0;
    for (int32_t i = 0; i + 1 < n; i++) push_pair(e, &hn, i, i + 1);
    while (hn > 0) {
        uint64_t top = heap_pop(e->heap, &hn);
        int32_t pos = (int32_t)(uint32_t)top, rank = (int32_t)(top >> 32);
        if (e->sym[pos] < 0) continue; /* merged into its left neighbour */
        int32_t right = e->next[pos];
        if (right >= n) continue;
        /* A stale entry still describes the current pair if the pair has its rank. */
        const merge_slot *mg = find_merge(e->tok, e->sym[pos], e->sym[right]);
        if (!mg || mg->rank != rank) continue;
        e->sym[pos] = mg->result;
        e->sym[right] = -1;
        e->next[pos] = e->next[right];
        if (e->next[pos] < n) e->prev[e->next[pos]] = pos;
        if (e->prev[pos] >= 0) push_pair(e, &hn, e->prev[pos], pos);
        if (e->next[pos] < n) push_pair(e, &hn, pos, e->next[pos]);
    }
    for (int32_t i = 0; i < n; i = e->next[i]) e->out[e->count++] = e->sym[i];
    return 0;
}

static int emit_piece(void *ctx, int64_t begin, int64_t end) {
    encoder *e = ctx;
    int64_t b = e->pt.off[begin];
    return bpe_piece(e, e->segment + b, e->pt.off[end] - b);
}

static int encode_plain(encoder *e, const uint8_t *s, int64_t n) {
    if (n == 0) return 0;
    e->segment = s;
    if (ds4_pt_decode(&e->pt, s, n)) return -1;
    return ds4_pt_split(&e->pt, emit_piece, e);
}

/* Split s[0..n) on the added tokens of pass k; gaps go to pass k + 1, then to BPE. */
static int encode_pass(encoder *e, int k, const uint8_t *s, int64_t n) {
    if (k == 2) return encode_plain(e, s, n);
    const added_pass *p = &e->tok->passes[k];
    if (p->n == 0) return encode_pass(e, k + 1, s, n);
    int64_t gap = 0;
    for (int64_t i = 0; i < n;) {
        int32_t t = match_added(p, s + i, n - i);
        if (t < 0) {
            i++;
            continue;
        }
        if (encode_pass(e, k + 1, s + gap, i - gap)) return -1;
        e->out[e->count++] = p->ids[t];
        i += p->off[t + 1] - p->off[t];
        gap = i;
    }
    return encode_pass(e, k + 1, s + gap, n - gap);
}

int64_t ds4_tok_encode(const ds4_tokenizer *tok, const uint8_t *text, int64_t len,
                       int32_t *out) {
    encoder e = {.tok = tok, .out = out};
    int rc = encode_pass(&e, 0, text, len);
    ds4_pt_free(&e.pt);
    memo_free(&e.memo);
    free(e.sym);
    free(e.next);
    free(e.prev);
    free(e.heap);
    return rc ? -1 : e.count;
}
