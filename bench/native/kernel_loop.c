/* Kernel-only decode loop: the dot kernels called directly on L2-resident rows, no
 * activation quantization, no pool, no Python, best of many repetitions; prints GB/s of
 * weights for the AVX2 row kernels, the AVX-512 row and multi-row kernels (ADR 0062), and
 * main's (or any revision's) AVX-512 Q2_K row kernel when bench/native/kernel_loop.sh
 * compiled one in. Checks the multi-row kernels against the row kernels bit for bit
 * first. Build and run: bench/native/kernel_loop.sh [REV] (x86-64 with AVX-512 only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_internal.h"

#ifdef OLD_REV
ds4_dot_fn old_dot_avx512_q2_k(void);
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Random blocks with sane f16 scales at the given byte offsets of each block. */
static uint8_t *random_rows(size_t n_bytes, size_t block, const size_t *f16_at, int n_f16) {
    uint8_t *w = aligned_alloc(64, (n_bytes + 63) / 64 * 64);
    for (size_t i = 0; i < n_bytes; i++) w[i] = (uint8_t)rand();
    for (size_t b = 0; b + block <= n_bytes; b += block)
        for (int k = 0; k < n_f16; k++) {
            uint16_t h = (uint16_t)(0x3800 | (rand() & 0x3ff));
            memcpy(w + b + f16_at[k], &h, 2);
        }
    return w;
}

typedef void (*loop_fn)(const void *ctx);
typedef struct {
    const uint8_t *w;
    size_t stride, rows, cols;
    const void *act;
    ds4_dot_fn dot;
    ds4_rows_fn multi;
    float *y;
} job;

static void by_row(const void *c) {
    const job *j = c;
    for (size_t r = 0; r < j->rows; r++) j->y[r] = j->dot(j->w + r * j->stride, j->act, j->cols);
}

static void by_group(const void *c) {
    const job *j = c;
    j->multi(j->w, j->stride, j->rows, j->act, j->cols, j->y);
}

static double best_seconds(loop_fn f, const job *j, int reps) {
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        f(j);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 300;
    if (reps < 1 || !ds4_cpu_impl_available(DS4_CPU_IMPL_AVX512)) {
        fprintf(stderr, "kernel_loop: needs reps >= 1 and the avx512 kernel set\n");
        return 2;
    }
    srand(1);
    const ds4_dot_table *t5 = ds4_cpu_dot_table(DS4_CPU_IMPL_AVX512);
    float *x = malloc(4096 * sizeof *x), *y = malloc(4096 * sizeof *y), *y2 = malloc(4096 * sizeof *y2);
    for (int i = 0; i < 4096; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;

    /* Q2_K 2048 x 512 rows (344 KiB), Q8_0 4096 x 256 rows (1.1 MiB): in L2 */
    size_t q2_cols = 2048, q2_rows = 512, q2_stride = q2_cols / 256 * 84;
    size_t q8_cols = 4096, q8_rows = 256, q8_stride = q8_cols / 32 * 34;
    const size_t q2_f16[2] = {80, 82}, q8_f16[1] = {0};
    uint8_t *w2 = random_rows(q2_rows * q2_stride, 84, q2_f16, 2);
    uint8_t *w8 = random_rows(q8_rows * q8_stride, 34, q8_f16, 1);
    ds4_block_q8k *xk = malloc(q2_cols / 256 * sizeof *xk);
    ds4_block_q8a *xa = malloc(q8_cols / 32 * sizeof *xa);
    ds4_cpu_quantize_q8k(x, q2_cols, xk);
    ds4_cpu_quantize_q8a(x, q8_cols, xa);

    job q2 = {w2, q2_stride, q2_rows, q2_cols, xk, t5->q2_k, ds4_cpu_pick_rows(t5, T_Q2_K), y};
    job q8 = {w8, q8_stride, q8_rows, q8_cols, xa, ds4_dots_avx2.q8_0, ds4_cpu_pick_rows(t5, T_Q8_0), y};
    /* the multi-row kernels' contract: the row kernel's bits */
    by_group(&q2);
    for (size_t r = 0; r < q2_rows; r++) y2[r] = q2.dot(w2 + r * q2_stride, xk, q2_cols);
    int bad = memcmp(y, y2, q2_rows * sizeof *y) != 0;
    by_group(&q8);
    for (size_t r = 0; r < q8_rows; r++) y2[r] = q8.dot(w8 + r * q8_stride, xa, q8_cols);
    bad |= memcmp(y, y2, q8_rows * sizeof *y) != 0;
    if (bad) {
        fprintf(stderr, "kernel_loop: a multi-row kernel differs from its row kernel\n");
        return 1;
    }
    double gb2 = (double)(q2_rows * q2_stride) / 1e9, gb8 = (double)(q8_rows * q8_stride) / 1e9;
    job q2_avx2 = q2;
    q2_avx2.dot = ds4_dots_avx2.q2_k;
    printf("GB/s of weights, best of %d, three rounds\n", reps);
    for (int round = 0; round < 3; round++) {
        double a2 = best_seconds(by_row, &q2_avx2, reps), r2 = best_seconds(by_row, &q2, reps);
        double g2 = best_seconds(by_group, &q2, reps);
        double a8 = best_seconds(by_row, &q8, reps), g8 = best_seconds(by_group, &q8, reps);
        printf("Q2_K 2048x512: avx2 row %.1f  avx512 row %.1f  avx512 4-row %.1f (%.2fx avx2)", gb2 / a2,
               gb2 / r2, gb2 / g2, a2 / g2);
#ifdef OLD_REV
        job q2_old = q2;
        q2_old.dot = old_dot_avx512_q2_k();
        double o2 = best_seconds(by_row, &q2_old, reps);
        printf("  old-rev avx512 row %.1f (4-row %.2fx of it)", gb2 / o2, o2 / g2);
#endif
        printf(" | Q8_0 4096x256: avx2 row %.1f  avx512 4-row %.1f (%.2fx)\n", gb8 / a8, gb8 / g8,
               a8 / g8);
    }
    return 0;
}
