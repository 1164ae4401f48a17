/* The official pre-tokenizer as a hand-written scanner over code points.
 *
 * tokenizer.json declares three Split steps (behaviour Isolated), applied in turn to
 * every piece of the previous step:
 *   1) \p{N}{1,3}   2) [CJK ranges]+   3) the main regex
 * N characters are never CJK and never matched by the main regex, so step 1+2 just
 * cut the text into number chunks (kept whole), CJK runs and the remaining runs, and
 * the main regex then runs inside each CJK run and each remaining run. */
#include "ds4_pretokenize.h"

#include "unicode_classes.h"

enum { CLS_OTHER = 0, CLS_LM = 1, CLS_N = 2, CLS_PS = 3, CLS_WS = 4 };

int ds4_tok_char_class(uint32_t cp) {
    if (cp >= 0x110000) return CLS_OTHER;
    return DS4_UC_BLOCKS[DS4_UC_STAGE1[cp >> 8]][cp & 0xFF];
}

static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF);
}

static int is_ascii_alpha(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

static int is_ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

static int is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* Decode one UTF-8 sequence at s[i] (input comes from Python, so it is valid;
 * a stray byte is read as one OTHER code point all the same). */
static uint32_t decode_utf8(const uint8_t *s, int64_t n, int64_t i, int *len) {
    uint8_t b = s[i];
    if (b < 0x80) {
        *len = 1;
        return b;
    }
    int need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    if (need == 1 || i + need > n) {
        *len = 1;
        return 0x110000;
    }
    uint32_t cp = b & (0x7F >> need);
    for (int k = 1; k < need; k++) cp = (cp << 6) | (s[i + k] & 0x3F);
    *len = need;
    return cp;
}

int ds4_pt_decode(ds4_pt_text *t, const uint8_t *s, int64_t n) {
    if (n + 1 > t->cap) {
        int64_t cap = n + 1 > 2 * t->cap ? n + 1 : 2 * t->cap;
        uint32_t *cp = realloc(t->cp, (size_t)cap * sizeof *cp);
        if (cp) t->cp = cp;
        int64_t *off = realloc(t->off, (size_t)cap * sizeof *off);
        if (off) t->off = off;
        uint8_t *cls = realloc(t->cls, (size_t)cap);
        if (cls) t->cls = cls;
        if (!cp || !off || !cls) return -1;
        t->cap = cap;
    }
    int64_t count = 0;
    for (int64_t i = 0; i < n;) {
        int len;
        uint32_t c = decode_utf8(s, n, i, &len);
        t->cp[count] = c;
        t->off[count] = i;
        t->cls[count] = (uint8_t)ds4_tok_char_class(c);
        count++;
        i += len;
    }
    t->off[count] = n;
    t->n = count;
    return 0;
}

void ds4_pt_free(ds4_pt_text *t) {
    free(t->cp);
    free(t->off);
    free(t->cls);
}

static int64_t run_of(const ds4_pt_text *t, int64_t p, int64_t end, int cls) {
    while (p < end && t->cls[p] == cls) p++;
    return p;
}

/* End of the main-regex match starting at code point p of a piece ending at `end`,
 * or -1 when no alternative matches there. Alternatives in order:
 *   A1 [ASCII punct][A-Za-z]+
 *   A2 [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *   A3  ?[\p{P}\p{S}]+[\r\n]*
 *   A4 \s*[\r\n]+    A5 \s+(?!\S)    A6 \s+                                      */
static int64_t main_match(const ds4_pt_text *t, int64_t p, int64_t end) {
    uint32_t c = t->cp[p];
    int cls = t->cls[p];
    if (is_ascii_punct(c) && p + 1 < end && is_ascii_alpha(t->cp[p + 1])) {
        int64_t e = p + 2;
        while (e < end && is_ascii_alpha(t->cp[e])) e++;
        return e;
    }
    /* A2. A letter/mark start gives the same end with or without the optional
     * prefix, so only the prefix case needs the look at p + 1. */
    if (cls == CLS_LM) return run_of(t, p, end, CLS_LM);
    if (!is_crlf(c) && cls != CLS_PS && p + 1 < end && t->cls[p + 1] == CLS_LM)
        return run_of(t, p + 1, end, CLS_LM);
    int64_t q = c == ' ' ? p + 1 : p;
    if (q < end && t->cls[q] == CLS_PS) {
        int64_t e = run_of(t, q, end, CLS_PS);
        while (e < end && is_crlf(t->cp[e])) e++;
        return e;
    }
    if (cls == CLS_WS) {
        int64_t ws_end = run_of(t, p, end, CLS_WS);
        for (int64_t r = ws_end - 1; r >= p; r--)
            if (is_crlf(t->cp[r])) return r + 1; /* A4: through the last CR/LF */
        if (ws_end == end || ws_end - p == 1) return ws_end; /* A5 at the end, or A6 */
        return ws_end - 1; /* A5: leave the last space to the next piece */
    }
    return -1;
}

/* Split [begin, end) with the main regex; matches and gaps both become pieces. */
static int split_main(const ds4_pt_text *t, int64_t begin, int64_t end, ds4_pt_emit emit,
                      void *ctx) {
    int64_t gap = begin;
    for (int64_t p = begin; p < end;) {
        int64_t e = main_match(t, p, end);
        if (e < 0) {
            p++;
            continue;
        }
        if (gap < p && emit(ctx, gap, p)) return -1;
        if (emit(ctx, p, e)) return -1;
        p = gap = e;
    }
    if (gap < end && emit(ctx, gap, end)) return -1;
    return 0;
}

int ds4_pt_split(const ds4_pt_text *t, ds4_pt_emit emit, void *ctx) {
    int64_t n = t->n;
    for (int64_t p = 0; p < n;) {
        int64_t e = p + 1;
        if (t->cls[p] == CLS_N) {
            while (e < n && e - p < 3 && t->cls[e] == CLS_N) e++;
            if (emit(ctx, p, e)) return -1;
        } else if (is_cjk(t->cp[p])) {
            while (e < n && is_cjk(t->cp[e])) e++;
            if (split_main(t, p, e, emit, ctx)) return -1;
        } else {
            while (e < n && t->cls[e] != CLS_N && !is_cjk(t->cp[e])) e++;
            if (split_main(t, p, e, emit, ctx)) return -1;
        }
        p = e;
    }
    return 0;
}

typedef struct {
    const ds4_pt_text *t;
    int64_t *ends;
    int64_t count;
} ends_ctx;

static int emit_end(void *ctx, int64_t begin, int64_t end) {
    ends_ctx *c = ctx;
    (void)begin;
    c->ends[c->count++] = c->t->off[end];
    return 0;
}

int64_t ds4_tok_pretokenize(const uint8_t *text, int64_t len, int64_t *ends) {
    ds4_pt_text t = {0};
    if (ds4_pt_decode(&t, text, len)) {
        ds4_pt_free(&t);
        return -1;
    }
    ends_ctx c = {&t, ends, 0};
    ds4_pt_split(&t, emit_end, &c);
    ds4_pt_free(&t);
    return c.count;
}
