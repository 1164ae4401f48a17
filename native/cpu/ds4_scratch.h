/* The scratch memory of the native kernels and forward pass: one arena per calling
 * thread, used as a stack (each call takes what it needs and gives it back before it
 * returns). It keeps its largest size, so once a decode step has run, the next ones
 * of the same shape allocate nothing; it grows (by at least half) only when a call
 * needs more than it holds. Pool workers never allocate: they write into the caller's
 * scratch. A thread's arena is freed when the thread exits, or on request. */
#ifndef DS4_SCRATCH_H
#define DS4_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t system_allocs;  /* mallocs the arena made (growth and overflow blocks) */
    size_t capacity;         /* bytes of the reusable block */
    size_t high_water;       /* most bytes in use at once (since the last release) */
    size_t in_use;           /* bytes in use now (0 between native calls) */
} ds4_scratch_stats;

/* The calling thread's counters (all zero if it never used the arena). */
void ds4_scratch_get_stats(ds4_scratch_stats *out);

/* Free the calling thread's arena (e.g. after a long prefill); the next native call
 * allocates afresh. Returns 0, or -1 (nothing freed) while scratch is in use. */
int ds4_scratch_release(void);

#endif
