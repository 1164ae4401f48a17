/* Internal helpers shared by the quantizer sources (not part of the cffi API). */
#ifndef DS4_QZ_INTERNAL_H
#define DS4_QZ_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Round half to even, clamp to [lo, hi], NaN -> lo, and never return -0.0
 * (mirrors numpy_quantize_search.nearest_clamped). */
static inline float qz_rint(float v) {
    /* rintf without a libm call: adding and removing 2^23 rounds to nearest even
     * exactly for |v| < 2^23 (the build forbids folding it away); larger values are
     * integers already, NaN stays NaN. */
    const float big = 8388608.0f;
    float a = fabsf(v);
    if (!(a < big)) return v;
    float r = (a + big) - big;
    return v < 0 ? -r : r;
}

static inline float qz_nearest(float v, float lo, float hi) {
    float r = qz_rint(v);
    if (!(r >= lo)) r = lo;
    if (r > hi) r = hi;
    return r + 0.0f;
}

static inline uint32_t qz_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float qz_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t qz_f32_to_f16(float f);
float qz_f16_to_f32(uint16_t h);

/* The value a scale has after being stored as f16 and read back. */
static inline float qz_round_f16(float f) { return qz_f16_to_f32(qz_f32_to_f16(f)); }

static inline void qz_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xffu);
    p[1] = (uint8_t)(v >> 8);
}

static inline void qz_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* docs/reference/formats.md §6.2 searches. L and La hold integer codes as floats. */
void qz_make_qkx(int n, float nmax, const float *x, const float *w, float rmin, float rdelta,
                 int nstep, int use_mad, float *scale, float *the_min, float *L, float *La);
float qz_make_qp(int n, float nmax, const float *x, const float *w, float *L);

void qz_q2_k_block(const float *x, const float *importance, uint8_t *out);
void qz_q4_k_block(const float *x, const float *importance, uint8_t *out);
void qz_q3_k_block(const float *x, uint8_t *out);
void qz_q5_k_block(const float *x, const float *importance, uint8_t *out);
void qz_q6_k_block(const float *x, uint8_t *out);
int qz_iq2_xxs_ready(void);
int qz_iq2_xxs_init(void);
void qz_iq2_xxs_block(const float *x, const float *importance, uint8_t *out);

#endif
