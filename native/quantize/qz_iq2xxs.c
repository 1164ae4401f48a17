/* IQ2_XXS block quantizer (docs/reference/formats.md §6.6); twin of numpy_quantize_iq2xxs.py. */
#include <stdlib.h>

#include "ds4_iq2xxs_levels.h"
#include "qz_internal.h"

#define KEY_SPACE 43692 /* every key sum(level_i << 2i) with levels 0..2 is below this */

static int16_t key_to_index[KEY_SPACE];
static uint32_t nb_start[KEY_SPACE];
static uint8_t nb_count[KEY_SPACE];
static uint8_t *nb_list; /* grid indices, the neighbours of each off-grid key in order */
static float grid_odd[256][8];
static int ready;

static int level_at(unsigned levels, int i) { return (int)((levels >> (2 * i)) & 3u); }

static int squared_distance(unsigned key, int p) {
    int d = 0;
    for (int i = 0; i < 8; i++) {
        int diff = 2 * (level_at(key, i) - level_at(DS4_IQ2XXS_LEVELS[p], i));
        d += diff * diff;
    }
    return d;
}

/* Neighbours of an off-grid key: the grid points at the two smallest distinct
 * distances, by (distance, index). Writes them to out (if not NULL); returns count. */
static int neighbours_of(unsigned key, uint8_t *out) {
    int d1 = 1 << 30, d2 = 1 << 30, count = 0;
    for (int p = 0; p < 256; p++) {
        int d = squared_distance(key, p);
        if (d < d1) {
            d2 = d1;
            d1 = d;
        } else if (d > d1 && d < d2) {
            d2 = d;
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        int want = pass ? d2 : d1;
        for (int p = 0; p < 256; p++) {
            if (squared_distance(key, p) != want) continue;
            if (out) out[count] = (uint8_t)p;
            count++;
        }
    }
    return count;
}

static int is_level_key(unsigned key) {
    for (int i = 0; i < 8; i++) {
        if (level_at(key, i) == 3) return 0;
    }
    return 1;
}

int qz_iq2_xxs_ready(void) { return ready; }

int qz_iq2_xxs_init(void) {
    if (ready) return 0;
    for (int k = 0; k < KEY_SPACE; k++) key_to_index[k] = -1;
    for (int p = 0; p < 256; p++) {
        key_to_index[DS4_IQ2XXS_LEVELS[p]] = (int16_t)p;
        for (int i = 0; i < 8; i++) grid_odd[p][i] = (float)(2 * level_at(DS4_IQ2XXS_LEVELS[p], i) + 1);
    }
    size_t total = 0;
    for (unsigned key = 0; key < KEY_SPACE; key++) {
        if (key_to_index[key] >= 0 || !is_level_key(key)) continue;
        nb_start[key] = (uint32_t)total;
        nb_count[key] = (uint8_t)neighbours_of(key, NULL);
        total += nb_count[key];
    }
    nb_list = malloc(total);
    if (!nb_list) return -1;
    for (unsigned key = 0; key < KEY_SPACE; key++) {
        if (nb_count[key]) neighbours_of(key, nb_list + nb_start[key]);
    }
    ready = 1;
    return 0;
}

/* Levels and grid index for each run of 8 magnitudes at 1/inv = scale. */
static void grid_codes(const float *xa, const float *wa, float inv, float scale, float *la,
                       int *index) {
    for (int k = 0; k < 4; k++) {
        const float *x = xa + 8 * k, *w = wa + 8 * k;
        float *l = la + 8 * k;
        unsigned key = 0;
        for (int i = 0; i < 8; i++) {
            l[i] = qz_nearest(0.5f * (inv * x[i] - 1.0f), 0, 2);
            key |= (unsigned)l[i] << (2 * i);
        }
        int gi = key_to_index[key];
        if (gi < 0) {
            const uint8_t *cand = nb_list + nb_start[key];
            float best = 0;
            for (int j = 0; j < nb_count[key]; j++) {
                const float *odd = grid_odd[cand[j]];
                float err = 0;
                for (int i = 0; i < 8; i++) {
                    float diff = scale * odd[i] - x[i];
                    float t = w[i] * diff * diff;
                    err = i ? err + t : t;
                }
                if (j == 0 || err < best) {
                    best = err;
                    gi = cand[j];
                }
            }
            for (int i = 0; i < 8; i++) l[i] = (float)level_at(DS4_IQ2XXS_LEVELS[gi], i);
        }
        index[k] = gi;
    }
}

static void fit(const float *w, const float *xa, const float *la, float *sqx, float *sq2) {
    for (int i = 0; i < 32; i++) {
        float odd = 2.0f * la[i] + 1.0f;
        float a = w[i] * xa[i] * odd, b = w[i] * odd * odd;
        *sqx = i ? *sqx + a : a;
        *sq2 = i ? *sq2 + b : b;
    }
}

/* One group of 32 values: grid indices and signs into words[0..1]; returns its scale. */
static float quantize_group(const float *x, const float *w, uint32_t *words) {
    float wa[32], xa[32], L[32], la[32];
    unsigned signs[4];
    for (int i = 0; i < 32; i++) wa[i] = sqrtf(w[i]);
    for (int k = 0; k < 4; k++) {
        unsigned bits = 0;
        for (int i = 0; i < 8; i++) {
            xa[8 * k + i] = fabsf(x[8 * k + i]);
            if (x[8 * k + i] < 0) bits |= 1u << i;
        }
        if (__builtin_popcount(bits) & 1) { /* parity must be even: flip the cheapest */
            int cheapest = 0;
            float least = w[8 * k] * x[8 * k] * x[8 * k];
            for (int i = 1; i < 8; i++) {
                float c = w[8 * k + i] * x[8 * k + i] * x[8 * k + i];
                if (c < least) {
                    least = c;
                    cheapest = i;
                }
            }
            xa[8 * k + cheapest] = -xa[8 * k + cheapest];
            bits ^= 1u << cheapest;
        }
        signs[k] = bits & 127u;
    }
    float biggest = xa[0];
    for (int i = 1; i < 32; i++) {
        if (xa[i] > biggest) biggest = xa[i];
    }
    if (biggest < 1e-15f) return 0;
    float scale = qz_make_qp(32, 4, xa, w, L);
    float eff = 3.0f * scale;
    if (!(eff > 0)) return 0;
    float best = 0, sqx, sq2;
    int index[4] = {0, 0, 0, 0}, trial[4];
    for (int t = -6; t <= 6; t++) {
        float inv = (5.0f + 0.1f * (float)t) / eff;
        grid_codes(xa, wa, inv, 1.0f / inv, la, trial);
        fit(w, xa, la, &sqx, &sq2);
        if (sq2 > 0 && sqx * sqx > best * sq2) {
            scale = sqx / sq2;
            best = scale * sqx;
            memcpy(index, trial, sizeof index);
        }
    }
    if (scale > 0) {
        grid_codes(xa, wa, 1.0f / scale, scale, la, index);
        fit(w, xa, la, &sqx, &sq2);
        if (sq2 > 0) scale = sqx / sq2;
    }
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; k++) signs[k] = ~signs[k] & 127u;
    }
    for (int k = 0; k < 4; k++) {
        words[0] |= (uint32_t)index[k] << (8 * k);
        words[1] |= (uint32_t)signs[k] << (7 * k);
    }
    return scale;
}

void qz_iq2_xxs_block(const float *x, const float *qw, uint8_t *out) {
    float w[256], scales[8];
    uint32_t words[16] = {0};
    float sumsq = 0;
    for (int i = 0; i < 256; i++) sumsq = i ? sumsq + x[i] * x[i] : x[i] * x[i];
    float sigma2 = sumsq / 256.0f;
    for (int i = 0; i < 256; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
    float max_scale = 0;
    for (int g = 0; g < 8; g++) {
        scales[g] = quantize_group(x + 32 * g, w + 32 * g, words + 2 * g);
        if (scales[g] > max_scale) max_scale = scales[g];
    }
    memset(out, 0, 66);
    if (max_scale == 0) return;
    float d = max_scale / 31.0f;
    qz_put_u16(out, qz_f32_to_f16(d));
    for (int g = 0; g < 8; g++) {
        float l = qz_nearest(0.5f * (scales[g] / d - 1.0f), 0, 15);
        words[2 * g + 1] |= (uint32_t)l << 28;
    }
    for (int i = 0; i < 16; i++) qz_put_u32(out + 2 + 4 * i, words[i]);
}
