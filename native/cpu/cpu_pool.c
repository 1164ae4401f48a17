/* Persistent thread pool (see cpu_pool.h). Workers claim chunks with an atomic counter;
 * which thread computes a chunk never changes its arithmetic, so results do not depend
 * on the thread count.
 *
 * Between jobs a worker may first spin (checking the job generation with a pause per
 * iteration) for up to the configured spin time, then sleeps on a condition variable.
 * A product posted while the workers spin starts without a futex wake-up; the caller
 * likewise spins briefly before sleeping on the last worker. Spinning is off by
 * default: on a machine whose cores are shared (measured: 2 cores, load 6) it made
 * small products 2-3x slower, because a spinning or preempted worker holds up the
 * caller (docs/adr/0060-avx512-kernels-and-pool-spin.md). The
 * condition variable is only signalled when a worker is asleep (counted under the
 * lock; generation and the sleeper count are sequentially consistent atomics, so a
 * worker going to sleep either sees the new job or is seen by the poster). */
#include "cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAX_THREADS 256
/* How long an idle worker spins before sleeping (ds4_pool_set_spin; 0: never). */
static atomic_long spin_ns;
/* The caller spins at most this long: a worker that is not running (a loaded machine)
 * needs the caller's core more than the caller needs a prompt return. */
#define WAIT_SPIN_NS 5000L

typedef struct {
    pthread_mutex_t lock;       /* guards the sleeps on wake / done, and quit */
    pthread_cond_t wake;        /* a new job or quit */
    pthread_cond_t done;        /* the last worker left the job */
    pthread_mutex_t run_lock;   /* one job at a time */
    pthread_t workers[MAX_THREADS];
    int n_workers;              /* threads besides the caller */
    atomic_ulong generation;
    atomic_int busy;            /* workers still inside the current job */
    atomic_int sleepers;        /* workers asleep on wake (or about to be) */
    atomic_int quit;
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

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Spin until cond() stops holding or limit_ns passed; returns whether it still holds. */
static int spin_while(int (*cond)(unsigned long), unsigned long arg, long limit_ns) {
    long start = 0;
    if (limit_ns <= 0) return cond(arg);
    for (unsigned i = 0; cond(arg); i++) {
        CPU_RELAX();
        if ((i & 63) == 0) {
            long t = now_ns();
            if (i == 0) start = t;
            else if (t - start > limit_ns) return cond(arg);
        }
    }
    return 0;
}

static int no_new_job(unsigned long seen) {
    return atomic_load(&pool.generation) == seen && !atomic_load(&pool.quit);
}

static int workers_busy(unsigned long unused) {
    (void)unused;
    return atomic_load(&pool.busy) > 0;
}

static void work_chunks(void) {
    for (;;) {
        size_t begin = atomic_fetch_add(&pool.next, pool.grain);
        if (begin >= pool.n_items) return;
        size_t end = begin + pool.grain < pool.n_items ? begin + pool.grain : pool.n_items;
        pool.fn(pool.ctx, begin, end);
    }
}

static void *worker_main(void *arg) {
    /* The generation at creation time, not at first look: a job posted before this
     * thread first runs must still be seen as new. */
    unsigned long seen = (unsigned long)(uintptr_t)arg;
    for (;;) {
        if (spin_while(no_new_job, seen, atomic_load(&spin_ns))) {
            pthread_mutex_lock(&pool.lock);
            atomic_fetch_add(&pool.sleepers, 1);
            while (no_new_job(seen)) pthread_cond_wait(&pool.wake, &pool.lock);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.lock);
        }
        if (atomic_load(&pool.quit)) break;
        seen = atomic_load(&pool.generation);
        work_chunks();
        if (atomic_fetch_sub(&pool.busy, 1) == 1) {
            pthread_mutex_lock(&pool.lock);  /* the caller may be between check and wait */
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return NULL;
}

static void stop_workers(void) {
    pthread_mutex_lock(&pool.lock);
    atomic_store(&pool.quit, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.n_workers; i++) pthread_join(pool.workers[i], NULL);
    atomic_store(&pool.quit, 0);
    pool.n_workers = 0;
}

static int start_workers(int n_workers) {
    pool.n_workers = 0;
    for (int i = 0; i < n_workers; i++) {
        /* stable: run_lock is held */
        void *arg = (void *)(uintptr_t)atomic_load(&pool.generation);
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

int ds4_pool_set_spin(long ns) {
    if (ns < 0 || ns > 10000000L) return -1;
    atomic_store(&spin_ns, ns);
    return 0;
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
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n_items = n_items;
    pool.grain = grain;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.busy, pool.n_workers);
    atomic_fetch_add(&pool.generation, 1);  /* publishes the fields above */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    work_chunks();
    long wait_ns = atomic_load(&spin_ns) < WAIT_SPIN_NS ? atomic_load(&spin_ns) : WAIT_SPIN_NS;
    if (spin_while(workers_busy, 0, wait_ns)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.busy) > 0) pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.run_lock);
}
