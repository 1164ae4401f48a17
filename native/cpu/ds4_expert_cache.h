/* The routed-expert cache of SSD streaming (docs/ssd-streaming.md): a budget of slots,
 * each holding one whole expert (its gate, up and down slices of a layer's stacked expert
 * tensors), filled on miss by direct reads from the GGUF file that bypass the page cache.
 * The forward acquires one expert at a time (ds4_xc_acquire .. ds4_xc_release), so one
 * slot is enough; the bytes are the file's, so results equal the mapped run's bit for bit.
 * Thread-safe: a mutex guards the bookkeeping, reads run outside it into a slot marked
 * loading (pinned), and a read-ahead thread loads the experts the next layer's router
 * predicts while the forward computes. */
#ifndef DS4_EXPERT_CACHE_H
#define DS4_EXPERT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "ds4_forward.h"

enum {
    DS4_XC_LRU = 0,        /* evict the least recently used expert */
    DS4_XC_DECAYED = 1     /* evict the lowest decayed use count (history kept) */
};

enum {
    DS4_XC_IO = 30,        /* a read of the model file failed or came up short */
    DS4_XC_ALL_PINNED = 31 /* every slot is in use by the running call */
};

typedef struct {
    uint64_t accesses, hits, misses, evictions;
    uint64_t bytes_read;   /* expert bytes read from the file */
    uint64_t read_ns;      /* wall time inside reads */
    uint64_t stall_ns;     /* wall time the forward waited for a missing expert */
    uint64_t resident;     /* slots holding an expert now */
} ds4_xc_stats;

/* A cache of n_slots slots of slot_bytes over the GGUF at path. direct: try O_DIRECT
 * (falls back to pread + POSIX_FADV_DONTNEED where the filesystem refuses it).
 * half_life: of DS4_XC_DECAYED, in accesses. NULL on failure (errno kept). */
ds4_xc *ds4_xc_new(const char *path, int n_layer, int n_expert, size_t n_slots,
                   size_t slot_bytes, int policy, double half_life, int direct);
void ds4_xc_free(ds4_xc *c);

/* Where layer's experts live: file offsets of its gate, up and down tensors and the
 * bytes of one expert in each; their sum (parts rounded to 64) must fit a slot. */
int ds4_xc_set_layer(ds4_xc *c, int layer, const uint64_t *offsets, const size_t *bytes);

/* Pointers to the expert's gate, up and down bytes, loading it on a miss; the slot stays
 * pinned until the matching release. Returns DS4_CPU_OK or an error code. */
int ds4_xc_acquire(ds4_xc *c, int layer, int expert, const uint8_t **parts);
void ds4_xc_release(ds4_xc *c, int layer, int expert);

/* Load an expert ahead of use without counting an access (preload), now, in the
 * caller; a no-op when it is resident or every slot is pinned. */
int ds4_xc_prefetch(ds4_xc *c, int layer, int expert);

/* Read-ahead: at most `count` predicted experts loaded ahead per request (0: none, the
 * default). Once layer l is routed the forward predicts layer l+1's experts (its router
 * on layer l's FFN input; exact for a hash-routed layer) and calls ds4_xc_readahead with
 * them, most likely first, and with layer l's own routed experts as `keep`. A background
 * thread loads each predicted expert that is not resident into the policy's victim slot,
 * never taking a slot that is pinned, loading, holds one of `keep` or holds an expert
 * this request loaded; until the next request, misses of the forward prefer other
 * victims than what it loaded. A new request drops the unserved rest of the previous
 * one. Returns at once. */
void ds4_xc_set_readahead(ds4_xc *c, int count);
void ds4_xc_readahead(ds4_xc *c, int layer, const int32_t *experts, int n, int keep_layer,
                      const int32_t *keep, int n_keep);
/* Experts loaded ahead so far and how many of them were used before being evicted. */
void ds4_xc_readahead_counts(const ds4_xc *c, uint64_t *loaded, uint64_t *used);
/* How good the predictions were: experts predicted (distinct per request), distinct
 * experts a predicted layer then used while its prediction was the latest, and how many
 * of those had been predicted (precision = correct / predicted, recall = correct /
 * actual). */
void ds4_xc_prediction_counts(const ds4_xc *c, uint64_t *predicted, uint64_t *actual,
                              uint64_t *correct);

void ds4_xc_get_stats(const ds4_xc *c, ds4_xc_stats *out);
void ds4_xc_reset_stats(ds4_xc *c);
/* Accesses per (layer, expert), n_layer * n_expert values: the expert profile. */
void ds4_xc_get_counts(const ds4_xc *c, uint64_t *out);
/* Record each access as layer * n_expert + expert into buf (up to cap; NULL stops). */
void ds4_xc_set_trace(ds4_xc *c, int32_t *buf, size_t cap);
size_t ds4_xc_trace_len(const ds4_xc *c);
/* mlock the cache's slot arena, or n bytes from p (widened to whole pages): 0, or the
 * errno of the refusal (ENOMEM/EPERM: RLIMIT_MEMLOCK too small). */
int ds4_xc_lock_arena(ds4_xc *c);
int ds4_xc_lock_range(const void *p, size_t n);

/* 1 when reads go through O_DIRECT. */
int ds4_xc_direct(const ds4_xc *c);

#endif
