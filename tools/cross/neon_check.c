/* NEON vs scalar cross check (built by tools/cross/neon_check.sh for aarch64, run under
 * qemu-aarch64). Random weight rows of every supported type, with edge scales (zero,
 * subnormal, largest finite, negative; MXFP4's E8M0 0, 1 and the largest) and edge codes, are dotted with prepared
 * activations by the scalar kernels and by each NEON table this CPU can run.
 *
 * Tolerance: quantized types must be bit-identical (their integer block sums are exact
 * and the f32 scaling repeats the scalar operations in order); F32/F16/BF16 may differ
 * in summation order only: |neon - scalar| <= 1e-5 * sum_i |w_i * x_i| per row.
 * Then ds4_cpu_matmul is run with SCALAR, NEON and AUTO on 1 and 3 threads.
 * Prints one line per type and check; exits 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_internal.h"
#include "fwd_internal.h"

#define ROWS 48
#define RTOL 1e-5

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double unif(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

static float gauss(void) {
    double u = unif() + 1e-300, v = unif();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* A finite f16 block scale: mostly ordinary values, sometimes an edge case. */
static uint16_t f16_scale(void) {
    static const uint16_t edge[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x0400};
    if (rnd() % 8 == 0) return edge[rnd() % (sizeof edge / sizeof edge[0])];
    uint16_t exp = (uint16_t)(5 + rnd() % 16);  /* about 2^-10 .. 2^5 */
    return (uint16_t)(((rnd() & 1) << 15) | (exp << 10) | (rnd() & 0x3ff));
}

/* An E8M0 block scale (2^(e-127)): mostly near 1, sometimes an edge (0, 1, 2^0, the
 * largest finite ones, whose products overflow alike in both kernels). */
static uint8_t e8m0_scale(void) {
    static const uint8_t edge[] = {0, 1, 127, 128, 250, 254};
    if (rnd() % 8 == 0) return edge[rnd() % (sizeof edge / sizeof edge[0])];
    return (uint8_t)(112 + rnd() % 24);  /* about 2^-15 .. 2^8 */
}

static float f32_value(void) {
    switch (rnd() % 16) {
    case 0: return 0.0f;
    case 1: return -1e-41f;  /* subnormal */
    case 2: return 3e30f;
    default: return gauss() * (float)ldexp(1.0, (int)(rnd() % 13) - 6);
    }
}

/* One weight row of `cols` values; variant 1 is the all-extreme row (largest codes). */
static void fill_row(int type, uint8_t *w, size_t cols, int variant) {
    switch (type) {
    case T_F32:
        for (size_t i = 0; i < cols; i++) {
            float v = f32_value();
            memcpy(w + 4 * i, &v, 4);
        }
        break;
    case T_F16:
        for (size_t i = 0; i < cols; i++) {
            uint16_t h = (uint16_t)rnd();
            if (((h >> 10) & 31) == 31) h &= 0xbfff;  /* no inf/NaN */
            put16(w + 2 * i, h);
        }
        break;
    case T_BF16:
        for (size_t i = 0; i < cols; i++) {
            uint16_t e = (uint16_t)(rnd() % 8 ? 87 + rnd() % 80 : rnd() % 2);  /* or subnormal */
            put16(w + 2 * i, (uint16_t)(((rnd() & 1) << 15) | (e << 7) | (rnd() & 0x7f)));
        }
        break;
    case T_Q8_0:
        for (size_t b = 0; b < cols / 32; b++) {
            uint8_t *blk = w + 34 * b;
            put16(blk, f16_scale());
            for (int i = 0; i < 32; i++) blk[2 + i] = variant ? 0x80 : (uint8_t)rnd();
        }
        break;
    case T_MXFP4:
        for (size_t b = 0; b < cols / 32; b++) {
            uint8_t *blk = w + 17 * b;
            blk[0] = e8m0_scale();
            /* variant 1: every code 0x7 / 0xf, the largest E2M1 magnitudes (+-12 doubled) */
            for (int i = 0; i < 16; i++) blk[1 + i] = variant ? 0xf7 : (uint8_t)rnd();
        }
        break;
    case T_IQ4_NL:
        for (size_t b = 0; b < cols / 32; b++) {
            uint8_t *blk = w + 18 * b;
            put16(blk, f16_scale());
            for (int i = 0; i < 16; i++) blk[2 + i] = variant ? 0x00 : (uint8_t)rnd();  /* 0: -127 */
        }
        break;
    default: {
        int kind;
        size_t values, bytes;
        ds4_cpu_type_info(type, &kind, &values, &bytes);
        for (size_t b = 0; b < cols / 256; b++) {
            uint8_t *blk = w + bytes * b;
            for (size_t i = 0; i < bytes; i++) blk[i] = variant ? 0xff : (uint8_t)rnd();
            if (type == T_Q2_K) {
                put16(blk + 80, f16_scale());
                put16(blk + 82, f16_scale());
            } else if (type == T_Q4_K || type == T_Q5_K) {
                put16(blk, f16_scale());
                put16(blk + 2, f16_scale());
            } else if (type == T_Q3_K || type == T_Q6_K) {
                put16(blk + bytes - 2, f16_scale());
            } else {
                put16(blk, f16_scale());
            }
        }
    }
    }
}

/* Prepared activation variants: 0 ordinary, 1 with code -128 poked in, 2 all -128,
 * 3 all zero. Returns the activation pointer (f32 or quantized blocks). */
static void *make_act(int kind, size_t cols, int variant, float *x, void *q) {
    for (size_t i = 0; i < cols; i++)
        x[i] = variant == 3 ? 0.0f : gauss() * (i % 97 ? 1.0f : 40.0f);
    if (kind == ACT_F32) return x;
    if (kind == ACT_Q8A) {
        ds4_block_q8a *a = q;
        ds4_cpu_quantize_q8a(x, cols, a);
        for (size_t b = 0; b < cols / 32; b++)
            for (int i = 0; i < 32; i++)
                if (variant == 2 || (variant == 1 && rnd() % 5 == 0)) a[b].q[i] = -128;
        return a;
    }
    ds4_block_q8k *a = q;
    ds4_cpu_quantize_q8k(x, cols, a);
    for (size_t b = 0; b < cols / 256; b++) {
        for (int i = 0; i < 256; i++)
            if (variant == 2 || (variant == 1 && rnd() % 5 == 0)) a[b].q[i] = -128;
        for (int k = 0; k < 16; k++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += a[b].q[16 * k + j];
            a[b].bsums[k] = (int16_t)s;
        }
    }
    return a;
}

/* sum_i |w_i * x_i| for a float-weight row. */
static double magnitude(int type, const uint8_t *w, const float *x, size_t cols) {
    double m = 0.0;
    for (size_t i = 0; i < cols; i++) {
        float wi;
        if (type == T_F32) memcpy(&wi, w + 4 * i, 4);
        else if (type == T_F16) wi = f16_to_f32(rd_u16(w + 2 * i));
        else wi = bf16_to_f32(rd_u16(w + 2 * i));
        m += fabs((double)wi * (double)x[i]);
    }
    return m;
}

static int same_bits(float a, float b) {
    return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b));
}

static const struct {
    int type;
    const char *name;
    size_t cols;
} TYPES[] = {
    {T_F32, "F32", 1037}, {T_F16, "F16", 1037}, {T_BF16, "BF16", 1037},
    {T_Q8_0, "Q8_0", 1120}, {T_Q2_K, "Q2_K", 2048}, {T_Q4_K, "Q4_K", 2048},
    {T_IQ2_XXS, "IQ2_XXS", 2048}, {T_MXFP4, "MXFP4", 1120}, {T_Q3_K, "Q3_K", 2304},
    {T_Q5_K, "Q5_K", 2304}, {T_Q6_K, "Q6_K", 2304},
    {T_IQ4_NL, "IQ4_NL", 1120},
    {T_IQ4_XS, "IQ4_XS", 2048}, {T_IQ2_XS, "IQ2_XS", 2048}, {T_IQ3_XXS, "IQ3_XXS", 2048},
    {T_IQ3_S, "IQ3_S", 2048},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static int failures = 0;

/* Every row x activation variant through one NEON table against scalar. */
static void check_table(const char *tname, const ds4_dot_table *table, size_t ti) {
    int type = TYPES[ti].type, kind;
    size_t cols = TYPES[ti].cols, bv, bb;
    ds4_cpu_type_info(type, &kind, &bv, &bb);
    size_t row_bytes = cols / bv * bb;
    uint8_t *w = malloc(ROWS * row_bytes);
    float *x = malloc(cols * sizeof *x);
    void *q = malloc(cols / 32 * sizeof(ds4_block_q8k));
    for (int r = 0; r < ROWS; r++) fill_row(type, w + r * row_bytes, cols, r == 0);
    ds4_dot_fn ref = ds4_cpu_pick_dot(&ds4_dots_scalar, type), got = ds4_cpu_pick_dot(table, type);
    int n = 0, bad = 0, exact = 0;
    double worst = 0.0;
    for (int variant = 0; variant < 4; variant++) {
        const void *act = make_act(kind, cols, variant, x, q);
        for (int r = 0; r < ROWS; r++, n++) {
            const uint8_t *row = w + r * row_bytes;
            float s = ref(row, act, cols), v = got(row, act, cols);
            if (same_bits(s, v)) {
                exact++;
                continue;
            }
            double bound = kind == ACT_F32 ? RTOL * magnitude(type, row, x, cols) : 0.0;
            double err = fabs((double)v - (double)s);
            if (bound > 0.0 && err / bound > worst) worst = err / bound;
            if (!(err <= bound)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s %s row %d act %d: scalar %.9g neon %.9g (bound %.3g)\n",
                            TYPES[ti].name, tname, r, variant, s, v, bound);
            }
        }
    }
    printf("%-5s %-8s %-4s %3d dots (4 activations%s): %3d bit-identical, worst err %.3f of "
           "bound%s\n",
           bad ? "FAIL" : "ok", TYPES[ti].name, tname, n,
           kind == ACT_F32 ? "" : ", codes -128 included", exact, worst,
           kind == ACT_F32 ? "" : " (bound 0: exact)");
    failures += bad != 0;
    free(w);
    free(x);
    free(q);
}

/* ds4_cpu_matmul: NEON and AUTO against SCALAR, 1 vs 3 threads, a -128 token included. */
static void check_matmul(size_t ti) {
    int type = TYPES[ti].type, kind;
    size_t cols = TYPES[ti].cols, bv, bb, rows = 37, n_tok = 3;
    ds4_cpu_type_info(type, &kind, &bv, &bb);
    size_t row_bytes = cols / bv * bb;
    uint8_t *w = malloc(rows * row_bytes);
    float *x = malloc(n_tok * cols * sizeof *x);
    float *y[4];
    for (size_t r = 0; r < rows; r++) fill_row(type, w + r * row_bytes, cols, 0);
    for (size_t i = 0; i < n_tok * cols; i++) x[i] = gauss();
    /* Token 2: tiny values whose quantization overflows 1/d, giving codes of -128. */
    for (size_t i = 0; i < cols; i++) x[2 * cols + i] = (i % 3 ? -1e-44f : 1e-45f);
    static const int impls[4] = {DS4_CPU_IMPL_SCALAR, DS4_CPU_IMPL_NEON, DS4_CPU_IMPL_AUTO,
                                 DS4_CPU_IMPL_NEON};
    static const int threads[4] = {1, 1, 1, 3};
    int rc = 0, bad = 0;
    for (int k = 0; k < 4; k++) {
        y[k] = malloc(n_tok * rows * sizeof(float));
        ds4_cpu_set_threads(threads[k]);
        rc |= ds4_cpu_matmul(type, w, row_bytes, rows, cols, x, n_tok, y[k], impls[k]);
    }
    for (size_t t = 0; t < n_tok; t++)
        for (size_t r = 0; r < rows; r++) {
            size_t i = t * rows + r;
            const uint8_t *row = w + r * row_bytes;
            double bound = kind == ACT_F32 ? RTOL * magnitude(type, row, x + t * cols, cols) : 0.0;
            if (!(fabs((double)y[1][i] - (double)y[0][i]) <= bound) && !same_bits(y[1][i], y[0][i]))
                bad++;
            if (!same_bits(y[2][i], y[1][i]) || !same_bits(y[3][i], y[1][i])) bad++;
        }
    printf("%-5s %-8s matmul %zux%zu x %zu tokens: NEON vs SCALAR, AUTO == NEON, 3 threads == 1"
           "%s\n", rc || bad ? "FAIL" : "ok", TYPES[ti].name, rows, cols, n_tok,
           rc ? " (bad return code)" : "");
    failures += rc || bad;
    for (int k = 0; k < 4; k++) free(y[k]);
    free(w);
    free(x);
}

/* The native forward's attention/indexer vector ops: NEON vs the sequential forms. */
static void check_vec(void) {
    const ds4_fw_vec *neon = ds4_fw_vec_for(DS4_CPU_IMPL_NEON);
    const ds4_fw_vec *seq = ds4_fw_vec_for(DS4_CPU_IMPL_SCALAR);
    int bad = neon == seq;
    float a[515], b[515], acc1[515], acc2[515];
    for (size_t n = 1; n <= 515; n += 57) {
        double mag = 0.0;
        for (size_t i = 0; i < n; i++) {
            a[i] = gauss(), b[i] = gauss();
            acc1[i] = acc2[i] = gauss();
            mag += fabs((double)a[i] * b[i]);
        }
        bad += fabs((double)neon->dot(a, b, n) - seq->dot(a, b, n)) > RTOL * mag + 1e-30;
        neon->axpy(acc1, 0.37f, b, n);
        seq->axpy(acc2, 0.37f, b, n);
        for (size_t i = 0; i < n; i++)
            bad += fabs((double)acc1[i] - acc2[i]) > RTOL * (fabs(acc2[i]) + fabs(b[i])) + 1e-30;
    }
    printf("%-5s fwd vec: NEON dot/axpy vs sequential on lengths 1..515\n", bad ? "FAIL" : "ok");
    failures += bad != 0;
}

int main(void) {
    ds4_cpu_tables_init();
    int sdot = ds4_cpu_have_sdot();
    const ds4_dot_table *chosen = ds4_cpu_dot_table(DS4_CPU_IMPL_NEON);
    int dispatch_ok = ds4_cpu_impl_available(DS4_CPU_IMPL_NEON) &&
                      !ds4_cpu_impl_available(DS4_CPU_IMPL_AVX2) &&
                      ds4_cpu_best_impl() == DS4_CPU_IMPL_NEON &&
                      ds4_cpu_dot_table(DS4_CPU_IMPL_AUTO) == chosen &&
                      chosen == (sdot ? &ds4_dots_neon_sdot : &ds4_dots_neon);
    printf("%-5s dispatch: NEON available, best impl NEON, AUTO -> %s table (SDOT %s)\n",
           dispatch_ok ? "ok" : "FAIL", sdot ? "neon_sdot" : "neon",
           sdot ? "reported by HWCAP" : "not reported");
    failures += !dispatch_ok;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        check_table("neon", &ds4_dots_neon, ti);
        int type = TYPES[ti].type;  /* the float kernels are shared by both tables */
        ds4_dot_fn base = ds4_cpu_pick_dot(&ds4_dots_neon, type);
        if (sdot && ds4_cpu_pick_dot(&ds4_dots_neon_sdot, type) != base)
            check_table("sdot", &ds4_dots_neon_sdot, ti);
        check_matmul(ti);
    }
    check_vec();
    ds4_cpu_set_threads(2);
    uint64_t macs0 = ds4_cpu_probe_macs(0, 1000), macs1 = ds4_cpu_probe_macs(1, 1000);
    printf("%-5s probe: %llu int8 MACs, %llu f32 MACs on 2 threads\n",
           macs0 && macs1 ? "ok" : "FAIL", (unsigned long long)macs0,
           (unsigned long long)macs1);
    failures += !(macs0 && macs1);
    printf("%s: %d failing check(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
