/* IQ2_XXS block quantizer (formats.md §4.6); twin of numpy_quantize_iq2xxs.py. */
#include <stdlib.h>

#include "qz_internal.h"

/* Level table (formats.md §2.6): bit pair 2i..2i+1 of entry idx is the level
 * (0, 1, 2) of grid position i; level l stands for the odd integer 2l+1. */
static const uint16_t LEVELS[256] = {
    0, 2, 5, 8, 10, 17, 20, 32, 34, 40, 42, 65, 68, 80, 88, 97,
    100, 128, 130, 138, 162, 257, 260, 272, 277, 320, 388, 408, 512, 514, 546, 642,
    1025, 1028, 1040, 1057, 1060, 1088, 1090, 1096, 1120, 1153, 1156, 1168, 1188, 1280, 1282, 1288,
    1312, 1350, 1385, 1408, 1425, 1545, 1552, 1600, 1668, 1700, 2048, 2053, 2056, 2068, 2088, 2113,
    2116, 2128, 2130, 2184, 2308, 2368, 2562, 2580, 4097, 4100, 4112, 4129, 4160, 4192, 4228, 4240,
    4245, 4352, 4360, 4384, 4432, 4442, 4480, 4644, 4677, 5120, 5128, 5152, 5157, 5193, 5248, 5400,
    5474, 5632, 5654, 6145, 6148, 6160, 6208, 6273, 6400, 6405, 6560, 6737, 8192, 8194, 8202, 8260,
    8289, 8320, 8322, 8489, 8520, 8704, 8706, 9217, 9220, 9232, 9280, 9302, 9472, 9537, 9572, 9872,
    10248, 10272, 10388, 10820, 16385, 16388, 16400, 16408, 16417, 16420, 16448, 16456, 16470, 16480, 16513, 16516,
    16528, 16640, 16672, 16737, 16768, 16773, 16897, 16912, 16968, 16982, 17000, 17408, 17416, 17440, 17536, 17561,
    17682, 17700, 17920, 18433, 18436, 18448, 18496, 18501, 18688, 18776, 18785, 18818, 19013, 19088, 20480, 20488,
    20497, 20505, 20512, 20608, 20616, 20740, 20802, 20900, 21137, 21648, 21650, 21770, 22017, 22100, 22528, 22545,
    22553, 22628, 22848, 23048, 24580, 24592, 24640, 24680, 24832, 24917, 25112, 25184, 25600, 25605, 25872, 25874,
    25988, 26690, 32768, 32770, 32778, 32833, 32898, 33028, 33048, 33088, 33297, 33793, 33796, 33808, 33813, 33856,
    33888, 34048, 34118, 34196, 34313, 34368, 34400, 34818, 35076, 35345, 36868, 36880, 36900, 36928, 37025, 37142,
    37248, 37445, 37888, 37922, 37956, 38225, 39041, 39200, 40962, 41040, 41093, 41225, 41472, 42008, 43088, 43268,
};

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
        int diff = 2 * (level_at(key, i) - level_at(LEVELS[p], i));
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
        key_to_index[LEVELS[p]] = (int16_t)p;
        for (int i = 0; i < 8; i++) grid_odd[p][i] = (float)(2 * level_at(LEVELS[p], i) + 1);
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
            for (int i = 0; i < 8; i++) l[i] = (float)level_at(LEVELS[gi], i);
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
