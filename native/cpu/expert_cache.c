/* The routed-expert cache (ds4_expert_cache.h, docs/ssd-streaming.md). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ds4_expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cpu_internal.h"

#define DIRECT_ALIGN 4096
#define PART_ALIGN 64
#define BOUNCE_BYTES ((size_t)8 << 20)
#define QUEUE_CAP 256

typedef struct {
    uint64_t off[3];
    size_t bytes[3], at[3];   /* per-expert bytes of each part, offset inside a slot */
    int set;
} layer_src;

typedef struct {
    double score;             /* decayed use count as of tick `last` */
    uint64_t last, uses;      /* tick of the last access, accesses in all */
    int32_t slot;             /* -1 when not resident */
} entry_meta;

typedef struct {
    int32_t key;              /* layer * n_expert + expert, -1 when empty */
    uint32_t pins;            /* users now, plus one while loading */
    uint8_t loading, ahead;   /* bytes being read; loaded by read-ahead, not used yet */
    uint32_t ahead_gen;       /* the read-ahead request that loaded it */
} slot_meta;

struct ds4_xc {
    pthread_mutex_t lock, io_lock;  /* io_lock: the callers' bounce buffer */
    pthread_cond_t loaded, work;
    int fd_direct, fd_plain, direct_ok;
    int n_layer, n_expert, policy, readahead;
    double half_life;
    size_t n_slots, slot_bytes;
    uint8_t *arena, *bounce, *bounce_ra;
    layer_src *layers;
    entry_meta *entries;
    slot_meta *slots;
    uint64_t tick, ra_loaded, ra_used;
    /* read-ahead requests are numbered (ra_gen); per key: the request that predicted it,
     * that asked to keep it, and the last one its use was counted under; per layer: the
     * latest request that predicted it (0: never) */
    uint32_t ra_gen, *pred_gen, *keep_gen, *seen_gen, *layer_gen;
    uint64_t ra_predicted, ra_actual, ra_correct;
    ds4_xc_stats st;
    int32_t *trace;
    size_t trace_cap, trace_len;
    /* read-ahead thread and its queue of keys */
    pthread_t thread;
    int thread_started, stop;
    int32_t queue[QUEUE_CAP];
    size_t q_head, q_len;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

ds4_xc *ds4_xc_new(const char *path, int n_layer, int n_expert, size_t n_slots,
                   size_t slot_bytes, int policy, double half_life, int direct) {
    if (n_layer <= 0 || n_expert <= 0 || n_slots == 0 || slot_bytes == 0 ||
        (policy != DS4_XC_LRU && policy != DS4_XC_DECAYED) || !(half_life > 0.0) ||
        (size_t)n_layer * (size_t)n_expert > INT32_MAX) {
        errno = EINVAL;
        return NULL;
    }
    ds4_xc *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd_direct = -1;
    c->fd_plain = open(path, O_RDONLY | O_CLOEXEC);
    if (c->fd_plain < 0) {
        free(c);
        return NULL;
    }
#ifdef O_DIRECT
    if (direct) c->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
#else
    (void)direct;
#endif
    c->direct_ok = c->fd_direct >= 0;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->io_lock, NULL);
    pthread_cond_init(&c->loaded, NULL);
    pthread_cond_init(&c->work, NULL);
    c->n_layer = n_layer;
    c->n_expert = n_expert;
    c->policy = policy;
    c->half_life = half_life;
    c->n_slots = n_slots;
    c->slot_bytes = (slot_bytes + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
    size_t n_entries = (size_t)n_layer * (size_t)n_expert;
    c->layers = calloc((size_t)n_layer, sizeof *c->layers);
    c->entries = calloc(n_entries, sizeof *c->entries);
    c->slots = calloc(n_slots, sizeof *c->slots);
    c->pred_gen = calloc(n_entries, sizeof *c->pred_gen);
    c->keep_gen = calloc(n_entries, sizeof *c->keep_gen);
    c->seen_gen = calloc(n_entries, sizeof *c->seen_gen);
    c->layer_gen = calloc((size_t)n_layer, sizeof *c->layer_gen);
    if (c->slot_bytes > SIZE_MAX / n_slots ||
        posix_memalign((void **)&c->arena, DIRECT_ALIGN, c->slot_bytes * n_slots))
        c->arena = NULL;
    if (posix_memalign((void **)&c->bounce, DIRECT_ALIGN, BOUNCE_BYTES)) c->bounce = NULL;
    if (posix_memalign((void **)&c->bounce_ra, DIRECT_ALIGN, BOUNCE_BYTES)) c->bounce_ra = NULL;
    if (!c->layers || !c->entries || !c->slots || !c->arena || !c->bounce || !c->bounce_ra ||
        !c->pred_gen || !c->keep_gen || !c->seen_gen || !c->layer_gen) {
        ds4_xc_free(c);
        errno = ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < n_entries; i++) c->entries[i].slot = -1;
    for (size_t s = 0; s < n_slots; s++) c->slots[s].key = -1;
    return c;
}

void ds4_xc_free(ds4_xc *c) {
    if (!c) return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->lock);
        c->stop = 1;
        pthread_cond_broadcast(&c->work);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
    }
    if (c->fd_direct >= 0) close(c->fd_direct);
    if (c->fd_plain >= 0) close(c->fd_plain);
    pthread_cond_destroy(&c->loaded);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->io_lock);
    pthread_mutex_destroy(&c->lock);
    free(c->arena);
    free(c->bounce);
    free(c->bounce_ra);
    free(c->layers);
    free(c->entries);
    free(c->slots);
    free(c->pred_gen);
    free(c->keep_gen);
    free(c->seen_gen);
    free(c->layer_gen);
    free(c);
}

int ds4_xc_set_layer(ds4_xc *c, int layer, const uint64_t *offsets, const size_t *bytes) {
    if (layer < 0 || layer >= c->n_layer) return DS4_CPU_BAD_SHAPE;
    layer_src *l = &c->layers[layer];
    size_t at = 0;
    for (int p = 0; p < 3; p++) {
        l->off[p] = offsets[p];
        l->bytes[p] = bytes[p];
        l->at[p] = at;
        at += (bytes[p] + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
    }
    if (at > c->slot_bytes) return DS4_CPU_BAD_SHAPE;
    l->set = 1;
    return DS4_CPU_OK;
}

/* Read len bytes at off into dst, bypassing the page cache: O_DIRECT through the
 * aligned bounce buffer, else pread + POSIX_FADV_DONTNEED. No lock needed. */
static int read_direct(ds4_xc *c, uint64_t off, size_t len, uint8_t *dst, uint8_t *bounce) {
    while (__atomic_load_n(&c->direct_ok, __ATOMIC_RELAXED) && len) {
        uint64_t start = off / DIRECT_ALIGN * DIRECT_ALIGN;
        size_t lead = (size_t)(off - start);
        size_t want = lead + len < BOUNCE_BYTES ? lead + len : BOUNCE_BYTES;
        size_t span = (want + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
        ssize_t got = pread(c->fd_direct, bounce, span, (off_t)start);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EINVAL) {  /* this filesystem takes no O_DIRECT */
            __atomic_store_n(&c->direct_ok, 0, __ATOMIC_RELAXED);
            break;
        }
        if (got <= (ssize_t)lead) return DS4_XC_IO;
        size_t n = (size_t)got - lead;
        if (n > want - lead) n = want - lead;
        memcpy(dst, bounce + lead, n);
        dst += n;
        off += n;
        len -= n;
    }
    uint64_t first = off;
    size_t total = len;
    while (len) {
        ssize_t got = pread(c->fd_plain, dst, len, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return DS4_XC_IO;
        dst += got;
        off += (uint64_t)got;
        len -= (size_t)got;
    }
    /* the page cache must not keep what the expert cache now holds */
    if (total) posix_fadvise(c->fd_plain, (off_t)first, (off_t)total, POSIX_FADV_DONTNEED);
    return DS4_CPU_OK;
}

static double decayed(const ds4_xc *c, const entry_meta *e) {
    return e->score * exp2(-(double)(c->tick - e->last) / c->half_life);
}

enum {
    SPARE_AHEAD = 1,  /* leave what the latest read-ahead request loaded */
    SPARE_KEPT = 2    /* leave the experts that request asked to keep */
};

/* The slot to fill: an empty one, else the policy's victim among unpinned ones not
 * spared (-1: none). Lock held. */
static int64_t victim(const ds4_xc *c, int spare) {
    int64_t best = -1;
    double best_score = 0.0;
    uint64_t best_last = 0;
    for (size_t s = 0; s < c->n_slots; s++) {
        const slot_meta *slot = &c->slots[s];
        if (slot->key < 0) return (int64_t)s;
        if (slot->pins) continue;
        if ((spare & SPARE_AHEAD) && slot->ahead && slot->ahead_gen == c->ra_gen) continue;
        if ((spare & SPARE_KEPT) && c->keep_gen[slot->key] == c->ra_gen) continue;
        const entry_meta *e = &c->entries[slot->key];
        double score = c->policy == DS4_XC_DECAYED ? decayed(c, e) : 0.0;
        if (best < 0 || score < best_score || (score == best_score && e->last < best_last)) {
            best = (int64_t)s;
            best_score = score;
            best_last = e->last;
        }
    }
    return best;
}

/* Load key into slot s (taken from its victim): the reads run unlocked, the slot marked
 * loading and pinned meanwhile. Called and returns with the lock held. */
static int load_into(ds4_xc *c, int32_t key, int64_t s, uint8_t *bounce, int main_thread) {
    slot_meta *slot = &c->slots[s];
    if (slot->key >= 0) {
        c->entries[slot->key].slot = -1;
        c->st.evictions++;
    } else {
        c->st.resident++;
    }
    slot->key = key;
    slot->pins = 1;
    slot->loading = 1;
    slot->ahead = 0;
    c->entries[key].slot = (int32_t)s;
    const layer_src *l = &c->layers[key / c->n_expert];
    int expert = key % c->n_expert;
    uint8_t *base = c->arena + (size_t)s * c->slot_bytes;
    pthread_mutex_unlock(&c->lock);
    if (main_thread) pthread_mutex_lock(&c->io_lock);
    uint64_t t0 = now_ns();
    int rc = DS4_CPU_OK;
    for (int p = 0; p < 3 && !rc; p++)
        rc = read_direct(c, l->off[p] + (uint64_t)expert * l->bytes[p], l->bytes[p],
                         base + l->at[p], bounce);
    uint64_t dt = now_ns() - t0;
    if (main_thread) pthread_mutex_unlock(&c->io_lock);
    pthread_mutex_lock(&c->lock);
    slot->loading = 0;
    slot->pins--;
    c->st.read_ns += dt;
    if (rc) {  /* the slot is empty again */
        slot->key = -1;
        c->entries[key].slot = -1;
        c->st.resident--;
    } else {
        c->st.bytes_read += l->bytes[0] + l->bytes[1] + l->bytes[2];
    }
    pthread_cond_broadcast(&c->loaded);
    return rc;
}

static int any_loading(const ds4_xc *c) {
    for (size_t s = 0; s < c->n_slots; s++)
        if (c->slots[s].loading) return 1;
    return 0;
}

static int check(const ds4_xc *c, int layer, int expert) {
    if (layer < 0 || layer >= c->n_layer || expert < 0 || expert >= c->n_expert)
        return DS4_CPU_BAD_EXPERT;
    return c->layers[layer].set ? DS4_CPU_OK : DS4_CPU_BAD_SHAPE;
}

int ds4_xc_acquire(ds4_xc *c, int layer, int expert, const uint8_t **parts) {
    int rc = check(c, layer, expert);
    if (rc) return rc;
    int32_t key = layer * c->n_expert + expert;
    pthread_mutex_lock(&c->lock);
    entry_meta *e = &c->entries[key];
    c->tick++;
    c->st.accesses++;
    if (c->trace && c->trace_len < c->trace_cap) c->trace[c->trace_len++] = key;
    uint32_t g = c->layer_gen[layer];
    if (g && c->seen_gen[key] != g) {  /* first use under this layer's latest prediction */
        c->seen_gen[key] = g;
        c->ra_actual++;
        if (c->pred_gen[key] == g) c->ra_correct++;
    }
    uint64_t t0 = now_ns();
    int hit = e->slot >= 0;
    if (hit && c->slots[e->slot].ahead) {
        c->slots[e->slot].ahead = 0;
        c->ra_used++;
    }
    while (e->slot >= 0 && c->slots[e->slot].loading)  /* read-ahead still reading it */
        pthread_cond_wait(&c->loaded, &c->lock);
    while (e->slot < 0) {  /* a miss, or a read-ahead of it that failed */
        hit = 0;
        /* spare what was just read ahead and what this layer uses next, if it can */
        int64_t s = victim(c, SPARE_AHEAD | SPARE_KEPT);
        if (s < 0) s = victim(c, 0);
        if (s < 0 && any_loading(c)) {  /* the read-ahead holds the free slot: wait */
            pthread_cond_wait(&c->loaded, &c->lock);
            continue;
        }
        if (s < 0) {
            rc = DS4_XC_ALL_PINNED;
            break;
        }
        if ((rc = load_into(c, key, s, c->bounce, 1))) break;
    }
    if (hit)
        c->st.hits++;
    else
        c->st.misses++;
    c->st.stall_ns += now_ns() - t0;
    if (!rc) {
        e->score = decayed(c, e) + 1.0;
        e->last = c->tick;
        e->uses++;
        c->slots[e->slot].pins++;
        const uint8_t *base = c->arena + (size_t)e->slot * c->slot_bytes;
        for (int p = 0; p < 3; p++) parts[p] = base + c->layers[layer].at[p];
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void ds4_xc_release(ds4_xc *c, int layer, int expert) {
    if (check(c, layer, expert)) return;
    pthread_mutex_lock(&c->lock);
    int32_t s = c->entries[layer * c->n_expert + expert].slot;
    if (s >= 0 && c->slots[s].pins) c->slots[s].pins--;
    pthread_mutex_unlock(&c->lock);
}

int ds4_xc_prefetch(ds4_xc *c, int layer, int expert) {
    int rc = check(c, layer, expert);
    if (rc) return rc;
    int32_t key = layer * c->n_expert + expert;
    pthread_mutex_lock(&c->lock);
    if (c->entries[key].slot < 0) {
        int64_t s = victim(c, 0);
        if (s >= 0) rc = load_into(c, key, s, c->bounce, 1);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* ---- read-ahead ------------------------------------------------------------------- */

static void *readahead_main(void *arg) {
    ds4_xc *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->q_len && !c->stop) pthread_cond_wait(&c->work, &c->lock);
        if (c->stop) break;
        int32_t key = c->queue[c->q_head];
        c->q_head = (c->q_head + 1) % QUEUE_CAP;
        c->q_len--;
        entry_meta *e = &c->entries[key];
        if (e->slot >= 0) continue;
        /* a predicted expert replaces the policy's victim, but never what this layer
         * is about to use nor another prediction of the same request */
        int64_t s = victim(c, SPARE_AHEAD | SPARE_KEPT);
        if (s < 0) continue;
        uint32_t gen = c->ra_gen;
        if (load_into(c, key, s, c->bounce_ra, 0) == DS4_CPU_OK && e->slot >= 0) {
            c->slots[e->slot].ahead = 1;
            c->slots[e->slot].ahead_gen = gen;
            c->ra_loaded++;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

void ds4_xc_set_readahead(ds4_xc *c, int count) {
    pthread_mutex_lock(&c->lock);
    c->readahead = count < 0 ? 0 : count;
    if (c->readahead && !c->thread_started &&
        pthread_create(&c->thread, NULL, readahead_main, c) == 0)
        c->thread_started = 1;
    if (!c->thread_started) c->readahead = 0;
    pthread_mutex_unlock(&c->lock);
}

void ds4_xc_readahead(ds4_xc *c, int layer, const int32_t *experts, int n, int keep_layer,
                      const int32_t *keep, int n_keep) {
    if (!c->readahead || layer < 0 || layer >= c->n_layer || !c->layers[layer].set) return;
    pthread_mutex_lock(&c->lock);
    if (++c->ra_gen == 0) c->ra_gen = 1;  /* 0 means "never" */
    uint32_t g = c->ra_gen;
    c->layer_gen[layer] = g;
    c->q_len = 0;  /* the previous request's unserved rest is stale now */
    if (keep_layer >= 0 && keep_layer < c->n_layer)
        for (int i = 0; i < n_keep; i++)
            if (keep[i] >= 0 && keep[i] < c->n_expert)
                c->keep_gen[keep_layer * c->n_expert + keep[i]] = g;
    int32_t base = layer * c->n_expert;
    for (int k = 0, taken = 0; k < n && taken < c->readahead; k++) {
        if (experts[k] < 0 || experts[k] >= c->n_expert) continue;
        int32_t key = base + experts[k];
        if (c->pred_gen[key] == g) continue;  /* listed twice */
        c->pred_gen[key] = g;
        c->ra_predicted++;
        taken++;
        if (c->entries[key].slot < 0 && c->q_len < QUEUE_CAP)
            c->queue[(c->q_head + c->q_len++) % QUEUE_CAP] = key;
    }
    if (c->q_len) pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->lock);
}

void ds4_xc_prediction_counts(const ds4_xc *c, uint64_t *predicted, uint64_t *actual,
                              uint64_t *correct) {
    pthread_mutex_lock((pthread_mutex_t *)&c->lock);
    *predicted = c->ra_predicted;
    *actual = c->ra_actual;
    *correct = c->ra_correct;
    pthread_mutex_unlock((pthread_mutex_t *)&c->lock);
}

void ds4_xc_readahead_counts(const ds4_xc *c, uint64_t *loaded, uint64_t *used) {
    pthread_mutex_lock((pthread_mutex_t *)&c->lock);
    *loaded = c->ra_loaded;
    *used = c->ra_used;
    pthread_mutex_unlock((pthread_mutex_t *)&c->lock);
}

/* ---- counters ------------------------------------------------------------------- */

void ds4_xc_get_stats(const ds4_xc *c, ds4_xc_stats *out) {
    pthread_mutex_lock((pthread_mutex_t *)&c->lock);
    *out = c->st;
    pthread_mutex_unlock((pthread_mutex_t *)&c->lock);
}

void ds4_xc_reset_stats(ds4_xc *c) {
    pthread_mutex_lock(&c->lock);
    uint64_t resident = c->st.resident;
    memset(&c->st, 0, sizeof c->st);
    c->st.resident = resident;
    c->ra_loaded = c->ra_used = 0;
    c->ra_predicted = c->ra_actual = c->ra_correct = 0;
    pthread_mutex_unlock(&c->lock);
}

void ds4_xc_get_counts(const ds4_xc *c, uint64_t *out) {
    pthread_mutex_lock((pthread_mutex_t *)&c->lock);
    size_t n = (size_t)c->n_layer * (size_t)c->n_expert;
    for (size_t i = 0; i < n; i++) out[i] = c->entries[i].uses;
    pthread_mutex_unlock((pthread_mutex_t *)&c->lock);
}

void ds4_xc_set_trace(ds4_xc *c, int32_t *buf, size_t cap) {
    pthread_mutex_lock(&c->lock);
    c->trace = buf;
    c->trace_cap = buf ? cap : 0;
    c->trace_len = 0;
    pthread_mutex_unlock(&c->lock);
}

size_t ds4_xc_trace_len(const ds4_xc *c) { return c->trace_len; }

int ds4_xc_direct(const ds4_xc *c) { return __atomic_load_n(&c->direct_ok, __ATOMIC_RELAXED); }

int ds4_xc_lock_arena(ds4_xc *c) {
    return mlock(c->arena, c->slot_bytes * c->n_slots) ? errno : 0;
}

int ds4_xc_lock_range(const void *p, size_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p / page * page;
    return mlock((const void *)start, n + ((uintptr_t)p - start)) ? errno : 0;
}
