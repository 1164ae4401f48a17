/* Persistent thread pool (see cpu_pool.h). Workers sleep on a condition variable
 * between jobs and claim chunks with an atomic counter; which thread computes a chunk
 * never changes its arithmetic, so results do not depend on the thread count. */
#include "cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct {
    pthread_mutex_t lock;       /* guards generation, job fields, busy, quit */
    pthread_cond_t wake;        /* a new job or quit */
    pthread_cond_t done;        /* the last worker left the job */
    pthread_mutex_t run_lock;   /* one job at a time */
    pthread_t workers[MAX_THREADS];
    int n_workers;              /* threads besides the caller */
    unsigned long generation;
    int busy;                   /* workers still inside the current job */
    int quit;
    ds4_pool_fn fn;
    void *ctx;
    size_t n_items, grain;
    atomic_size_t next;
} pool_t;

static pool_t pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .run_lock = PTHREAD_MUTEX_INITIALIZER,
    .n_workers = -1,  /* not started: the first use starts one thread per core */
};

static void work_chunks(void) {
    for (;;) {
        size_t begin = atomic_fetch_add(&pool.next, pool.grain);
        if (begin >= pool.n_items) return;
        size_t end = begin + pool.grain < pool.n_items ? begin + pool.grain : pool.n_items;
        pool.fn(pool.ctx, begin, end);
    }
}

static void *worker_main(void *arg) {
    /* The generation at creation time, not at first lock: a job posted before this
     * thread first runs must still be seen as new. */
    unsigned long seen = (unsigned long)(uintptr_t)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen && !pool.quit) pthread_cond_wait(&pool.wake, &pool.lock);
        if (pool.quit) break;
        seen = pool.generation;
        pthread_mutex_unlock(&pool.lock);
        work_chunks();
        pthread_mutex_lock(&pool.lock);
        if (--pool.busy == 0) pthread_cond_signal(&pool.done);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

static void stop_workers(void) {
    pthread_mutex_lock(&pool.lock);
    pool.quit = 1;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.n_workers; i++) pthread_join(pool.workers[i], NULL);
    pool.quit = 0;
    pool.n_workers = 0;
}

static int start_workers(int n_workers) {
    pool.n_workers = 0;
    for (int i = 0; i < n_workers; i++) {
        void *arg = (void *)(uintptr_t)pool.generation;  /* stable: run_lock is held */
        if (pthread_create(&pool.workers[i], NULL, worker_main, arg) != 0) return -1;
        pool.n_workers++;
    }
    return 0;
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > MAX_THREADS ? MAX_THREADS : (int)n);
}

static void ensure_started_locked(void) {
    if (pool.n_workers < 0) start_workers(default_threads() - 1);
}

int ds4_pool_set_threads(int n) {
    if (n < 1 || n > MAX_THREADS) return -1;
    pthread_mutex_lock(&pool.run_lock);
    int rc = 0;
    if (pool.n_workers != n - 1) {
        if (pool.n_workers > 0) stop_workers();
        rc = start_workers(n - 1);
    }
    pthread_mutex_unlock(&pool.run_lock);
    return rc;
}

int ds4_pool_threads(void) {
    pthread_mutex_lock(&pool.run_lock);
    ensure_started_locked();
    int n = pool.n_workers + 1;
    pthread_mutex_unlock(&pool.run_lock);
    return n;
}

void ds4_pool_run(ds4_pool_fn fn, void *ctx, size_t n_items, size_t grain) {
    if (n_items == 0) return;
    if (grain == 0) grain = 1;
    pthread_mutex_lock(&pool.run_lock);
    ensure_started_locked();
    if (pool.n_workers == 0 || n_items <= grain) {
        fn(ctx, 0, n_items);  /* one chunk: no wake-up round trip */
        pthread_mutex_unlock(&pool.run_lock);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n_items = n_items;
    pool.grain = grain;
    atomic_store(&pool.next, 0);
    pool.busy = pool.n_workers;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    work_chunks();
    pthread_mutex_lock(&pool.lock);
    while (pool.busy > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.run_lock);
}
