/* Persistent pthread pool: workers are created once and woken per job. A job is a
 * range of items handed out in fixed-size chunks; the caller's thread works too. */
#ifndef DS4_CPU_POOL_H
#define DS4_CPU_POOL_H

#include <stddef.h>

typedef void (*ds4_pool_fn)(void *ctx, size_t begin, size_t end);

/* Resize the pool to n threads in total (the caller counts as one). */
int ds4_pool_set_threads(int n);
int ds4_pool_threads(void);
/* How long idle workers spin before sleeping, 0..10^7 ns (default 0: sleep at once). */
int ds4_pool_set_spin(long ns);

/* Run fn over [0, n_items) in chunks of `grain` items; returns when all are done.
 * Calls from several threads are serialized. */
void ds4_pool_run(ds4_pool_fn fn, void *ctx, size_t n_items, size_t grain);

#endif
