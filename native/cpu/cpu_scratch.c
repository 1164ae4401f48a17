/* Per-thread scratch arena (ds4_scratch.h). Allocations are carved from one block in
 * stack order; when a call needs more than the block holds, the excess comes from
 * separate overflow blocks, freed when their scope ends. Once no scratch is in use
 * (the outermost scope ended), a block that proved too small is replaced by one that
 * holds the whole high-water mark, so a repeated call shape settles on zero mallocs. */
#include <pthread.h>
#include <stdlib.h>

#include "cpu_internal.h"
#include "ds4_scratch.h"

#define ALIGN 64  /* every allocation starts on a cache line (and any SIMD alignment) */

typedef struct spill {
    struct spill *prev;
    size_t mark;  /* the logical top when this block was taken */
} spill;

#define SPILL_HEADER ((sizeof(spill) + ALIGN - 1) / ALIGN * ALIGN)

typedef struct {
    unsigned char *base;  /* the reusable block (capacity bytes, ALIGN-aligned) */
    size_t capacity;
    size_t top;           /* logical bytes in use: the block's, then the spills' */
    size_t want;          /* high-water mark of top since the last growth */
    spill *spills;        /* newest first; while any exists, allocations spill */
    uint64_t system_allocs;
} arena;

static _Thread_local arena *tls_arena;
static pthread_key_t arena_key;
static pthread_once_t arena_key_once = PTHREAD_ONCE_INIT;

static void arena_destroy(void *p) {
    arena *a = p;
    while (a->spills) {
        spill *s = a->spills;
        a->spills = s->prev;
        free(s);
    }
    free(a->base);
    free(a);
}

static void make_key(void) { pthread_key_create(&arena_key, arena_destroy); }

static void *aligned_block(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, ALIGN, bytes) == 0 ? p : NULL;
}

static arena *get_arena(void) {
    if (tls_arena) return tls_arena;
    arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    pthread_once(&arena_key_once, make_key);
    pthread_setspecific(arena_key, a);  /* freed by arena_destroy at thread exit */
    tls_arena = a;
    return a;
}

size_t ds4_scratch_mark(void) {
    arena *a = get_arena();
    return a ? a->top : 0;
}

void *ds4_scratch_alloc(size_t bytes) {
    arena *a = get_arena();
    if (!a) return NULL;
    if (bytes > SIZE_MAX - 2 * ALIGN) return NULL;
    size_t n = bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN;
    void *p;
    if (!a->spills && a->capacity - a->top >= n) {
        p = a->base + a->top;
    } else {
        spill *s = aligned_block(SPILL_HEADER + n);
        if (!s) return NULL;
        a->system_allocs++;
        s->prev = a->spills;
        s->mark = a->top;
        a->spills = s;
        p = (unsigned char *)s + SPILL_HEADER;
    }
    a->top += n;
    if (a->top > a->want) a->want = a->top;
    return p;
}

void ds4_scratch_reset(size_t mark) {
    arena *a = tls_arena;
    if (!a) return;
    while (a->spills && a->spills->mark >= mark) {
        spill *s = a->spills;
        a->spills = s->prev;
        free(s);
    }
    a->top = mark;
    if (mark != 0 || a->want <= a->capacity) return;
    /* Nothing is in use: replace the block by one that holds the high-water mark. */
    size_t grown = a->capacity + a->capacity / 2;
    size_t cap = a->want > grown ? a->want : grown;
    free(a->base);
    a->base = aligned_block(cap);
    a->capacity = a->base ? cap : 0;  /* on failure every allocation spills */
    a->system_allocs++;
}

void ds4_scratch_get_stats(ds4_scratch_stats *out) {
    arena *a = tls_arena;
    out->system_allocs = a ? a->system_allocs : 0;
    out->capacity = a ? a->capacity : 0;
    out->high_water = a ? a->want : 0;
    out->in_use = a ? a->top : 0;
}

int ds4_scratch_release(void) {
    arena *a = tls_arena;
    if (!a) return 0;
    if (a->top) return -1;
    free(a->base);
    a->base = NULL;
    a->capacity = a->want = 0;
    return 0;
}
