#include "ds4_quant.h"

#include <string.h>

#include "ds4_iq2xxs_levels.h"
#include "ds4_iq4_values.h"
#include "ds4_iq_grids.h"

/* ---- scalar conversions ------------------------------------------------ */

static float f32_from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float ds4_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) { /* inf / nan, payload kept */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    }
    if (exp == 0) {
        if (man == 0) return f32_from_bits(sign);
        /* subnormal half: normalise into a binary32 normal */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while ((man & 0x400u) == 0);
        man &= 0x3ffu;
        return f32_from_bits(sign | ((uint32_t)(112 - e) << 23) | (man << 13));
    }
    return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

static uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static float rd_f16(const uint8_t *p) { return ds4_f16_to_f32(rd_u16(p)); }

/* ---- IQ2_XXS tables ---------------------------------------------------- */

static int iq2xxs_grid_value(unsigned idx, unsigned pos) {
    static const int level_value[4] = {8, 25, 43, 0};
    return level_value[(DS4_IQ2XXS_LEVELS[idx] >> (2 * pos)) & 3u];
}

static int parity7(unsigned s) {
    s ^= s >> 4;
    s ^= s >> 2;
    s ^= s >> 1;
    return (int)(s & 1u);
}

/* ---- block dequantizers ------------------------------------------------ */

static void dq_q8_0(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    for (int i = 0; i < 32; i++) y[i] = d * (float)(int8_t)b[2 + i];
}

static void dq_q2_k(const uint8_t *b, float *y) {
    const uint8_t *scales = b;
    const uint8_t *qs = b + 16;
    float d = rd_f16(b + 80);
    float dmin = rd_f16(b + 82);
    for (int v = 0; v < 256; v++) {
        int h = v / 128, lane = (v % 128) / 32, l = v % 32;
        int q = (qs[32 * h + l] >> (2 * lane)) & 3;
        uint8_t s = scales[v / 16];
        float dl = d * (float)(s & 15);
        float ml = dmin * (float)(s >> 4);
        y[v] = dl * (float)q - ml;
    }
}

static void q4k_scale_min(int j, const uint8_t *sc, int *s, int *m) {
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
        *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

static void dq_q4_k(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    float dmin = rd_f16(b + 2);
    const uint8_t *sc = b + 4;
    const uint8_t *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int s, m;
        q4k_scale_min(j, sc, &s, &m);
        float dl = d * (float)s;
        float ml = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            uint8_t byte = qs[32 * (j / 2) + l];
            int q = (j % 2) ? (byte >> 4) : (byte & 15);
            y[32 * j + l] = dl * (float)q - ml;
        }
    }
}

static void dq_iq2_xxs(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    for (int g = 0; g < 8; g++) {
        uint32_t a = rd_u32(b + 2 + 8 * g);
        uint32_t s = rd_u32(b + 6 + 8 * g);
        float db = d * (0.5f + (float)(s >> 28)) * 0.25f;
        for (int k = 0; k < 4; k++) {
            unsigned idx = (a >> (8 * k)) & 255u;
            unsigned sidx = (s >> (7 * k)) & 127u;
            unsigned signs = sidx | ((unsigned)parity7(sidx) << 7);
            for (int i = 0; i < 8; i++) {
                /* multiply by -1 rather than negate: same bits as numpy, NaN included */
                float sign = ((signs >> i) & 1u) ? -1.0f : 1.0f;
                y[32 * g + 8 * k + i] = db * (float)iq2xxs_grid_value(idx, (unsigned)i) * sign;
            }
        }
    }
}

/* MXFP4 (docs/reference/formats.md §4.8): doubled E2M1 magnitudes times 2^(e-128);
 * scale bytes 0 and 1 are the subnormals 2^-128 and 2^-127, 255 is 2^127. */
static const int8_t MXFP4_KVALUES[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float e8m0_half(uint8_t e) {
    return f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

static void dq_mxfp4(const uint8_t *b, float *y) {
    float d = e8m0_half(b[0]);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)MXFP4_KVALUES[b[1 + j] & 15];
        y[j + 16] = d * (float)MXFP4_KVALUES[b[1 + j] >> 4];
    }
}

/* IQ4_NL / IQ4_XS (docs/reference/formats.md §4.9, §4.10): 16-byte code runs, value j the
 * low nibble of byte j and value j + 16 its high nibble, each a signed level times the
 * (sub-)block scale; IQ4_XS's 6-bit scale is offset by 32 and multiplied into d first. */
static void dq_iq4_run(float d, const uint8_t *qs, float *y) {
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)DS4_IQ4_KVALUES[qs[j] & 15];
        y[j + 16] = d * (float)DS4_IQ4_KVALUES[qs[j] >> 4];
    }
}

static void dq_iq4_nl(const uint8_t *b, float *y) { dq_iq4_run(rd_f16(b), b + 2, y); }

static void dq_iq4_xs(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    unsigned high = rd_u16(b + 2);
    for (int i = 0; i < 8; i++) {
        int s = (int)(((b[4 + i / 2] >> (4 * (i % 2))) & 15) | (((high >> (2 * i)) & 3) << 4));
        dq_iq4_run(d * (float)(s - 32), b + 8 + 16 * i, y + 32 * i);
    }
}

/* IQ2_XS, IQ3_XXS, IQ3_S (docs/reference/formats.md §4.11-§4.13): grid rows packed one
 * byte per position; value = (db * g) * sign with db as gguf-py forms it. */
static float grid_value(float db, unsigned g, int negative) {
    /* a multiply by a variable sign, not a negation: NaN keeps numpy's sign bit */
    float sign = negative ? -1.0f : 1.0f;
    return db * (float)g * sign;
}

static unsigned even_signs(unsigned sidx) { return sidx | ((unsigned)parity7(sidx) << 7); }

static void dq_iq2_xs(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    for (int k = 0; k < 32; k++) {  /* 8 values per u16 */
        unsigned q = rd_u16(b + 2 + 2 * k);
        unsigned s = (b[66 + k / 4] >> (4 * ((k / 2) % 2))) & 15u;
        float db = d * (0.5f + (float)s) * 0.25f;
        uint64_t g = DS4_IQ2XS_GRID[q & 511u];
        unsigned signs = even_signs(q >> 9);
        for (int i = 0; i < 8; i++)
            y[8 * k + i] = grid_value(db, (unsigned)(g >> (8 * i)) & 255u, (signs >> i) & 1u);
    }
}

static void dq_iq3_xxs(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    for (int r = 0; r < 8; r++) {  /* 32 values per u32 of signs and scale */
        uint32_t aux = rd_u32(b + 66 + 4 * r);
        float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
        for (int k = 0; k < 8; k++) {  /* 4 values per grid byte */
            uint32_t g = DS4_IQ3XXS_GRID[b[2 + 8 * r + k]];
            unsigned signs = even_signs((aux >> (7 * (k / 2))) & 127u);
            for (int i = 0; i < 4; i++) {
                int j = 4 * (k % 2) + i;
                y[32 * r + 4 * k + i] = grid_value(db, (g >> (8 * i)) & 255u, (signs >> j) & 1u);
            }
        }
    }
}

static void dq_iq3_s(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    for (int r = 0; r < 8; r++) {
        unsigned s = (b[106 + r / 2] >> (4 * (r % 2))) & 15u;
        float db = d * (float)(1u + 2u * s);
        for (int k = 0; k < 8; k++) {
            int idx = 8 * r + k;
            unsigned gi = b[2 + idx] | (((unsigned)(b[66 + idx / 8] >> (idx % 8)) & 1u) << 8);
            uint32_t g = DS4_IQ3S_GRID[gi];
            for (int i = 0; i < 4; i++) {
                int v = 4 * idx + i;
                y[v] = grid_value(db, (g >> (8 * i)) & 255u, (b[74 + v / 8] >> (v % 8)) & 1u);
            }
        }
    }
}

/* Q3_K, Q5_K, Q6_K (docs/reference/formats.md §4.14; twin of adapters/quant/kquant_blocks.py). */
static void dq_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
    float d = rd_f16(b + 108);
    for (int k = 0; k < 16; k++) {
        int lo = k < 8 ? (sc[k] & 15) : (sc[k - 8] >> 4);
        int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        float dl = d * (float)((lo | (hi << 4)) - 32);
        for (int i = 0; i < 16; i++) {
            int v = 16 * k + i, h = v / 128, j = (v % 128) / 32, l = v % 32;
            int q = ((qs[32 * h + l] >> (2 * j)) & 3) - (((hmask[l] >> (v / 32)) & 1) ? 0 : 4);
            y[v] = dl * (float)q;
        }
    }
}

static void dq_q5_k(const uint8_t *b, float *y) {
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        int s, m;
        q4k_scale_min(j, sc, &s, &m);
        float dl = d * (float)s, ml = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int q = ((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | (((qh[l] >> j) & 1) << 4);
            y[32 * j + l] = dl * (float)q - ml;
        }
    }
}

static void dq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd_f16(b + 208);
    for (int v = 0; v < 256; v++) {
        int h = v / 128, r = v % 128;
        int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float dl = d * (float)sc[v / 16];
        y[v] = dl * (float)((lo | (hi << 4)) - 32);
    }
}

/* ---- dispatch ---------------------------------------------------------- */

size_t ds4_block_bytes(int type) {
    switch (type) {
    case DS4_TYPE_F32: return 4;
    case DS4_TYPE_F16: return 2;
    case DS4_TYPE_BF16: return 2;
    case DS4_TYPE_Q8_0: return 34;
    case DS4_TYPE_Q2_K: return 84;
    case DS4_TYPE_Q4_K: return 144;
    case DS4_TYPE_IQ2_XXS: return 66;
    case DS4_TYPE_MXFP4: return 17;
    case DS4_TYPE_Q3_K: return 110;
    case DS4_TYPE_Q5_K: return 176;
    case DS4_TYPE_Q6_K: return 210;
    case DS4_TYPE_IQ4_NL: return 18;
    case DS4_TYPE_IQ4_XS: return 136;
    case DS4_TYPE_IQ2_XS: return 74;
    case DS4_TYPE_IQ3_XXS: return 98;
    case DS4_TYPE_IQ3_S: return 110;
    default: return 0;
    }
}

size_t ds4_block_elements(int type) {
    switch (type) {
    case DS4_TYPE_F32:
    case DS4_TYPE_F16:
    case DS4_TYPE_BF16: return 1;
    case DS4_TYPE_Q8_0:
    case DS4_TYPE_MXFP4:
    case DS4_TYPE_IQ4_NL: return 32;
    case DS4_TYPE_Q2_K:
    case DS4_TYPE_Q4_K:
    case DS4_TYPE_IQ2_XXS:
    case DS4_TYPE_Q3_K:
    case DS4_TYPE_Q5_K:
    case DS4_TYPE_Q6_K:
    case DS4_TYPE_IQ4_XS:
    case DS4_TYPE_IQ2_XS:
    case DS4_TYPE_IQ3_XXS:
    case DS4_TYPE_IQ3_S: return 256;
    default: return 0;
    }
}

int ds4_dequantize(int type, const uint8_t *src, size_t n, float *dst) {
    size_t be = ds4_block_elements(type);
    size_t bb = ds4_block_bytes(type);
    if (be == 0) return DS4_QUANT_UNSUPPORTED_TYPE;
    if (n % be != 0) return DS4_QUANT_BAD_LENGTH;
    size_t nb = n / be;
    switch (type) {
    case DS4_TYPE_F32:
        memcpy(dst, src, n * 4);
        return DS4_QUANT_OK;
    case DS4_TYPE_F16:
        for (size_t i = 0; i < n; i++) dst[i] = rd_f16(src + 2 * i);
        return DS4_QUANT_OK;
    case DS4_TYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = f32_from_bits((uint32_t)rd_u16(src + 2 * i) << 16);
        return DS4_QUANT_OK;
    default: break;
    }
    for (size_t ib = 0; ib < nb; ib++) {
        const uint8_t *b = src + ib * bb;
        float *y = dst + ib * be;
        switch (type) {
        case DS4_TYPE_Q8_0: dq_q8_0(b, y); break;
        case DS4_TYPE_Q2_K: dq_q2_k(b, y); break;
        case DS4_TYPE_Q4_K: dq_q4_k(b, y); break;
        case DS4_TYPE_IQ2_XXS: dq_iq2_xxs(b, y); break;
        case DS4_TYPE_MXFP4: dq_mxfp4(b, y); break;
        case DS4_TYPE_Q3_K: dq_q3_k(b, y); break;
        case DS4_TYPE_Q5_K: dq_q5_k(b, y); break;
        case DS4_TYPE_Q6_K: dq_q6_k(b, y); break;
        case DS4_TYPE_IQ4_NL: dq_iq4_nl(b, y); break;
        case DS4_TYPE_IQ4_XS: dq_iq4_xs(b, y); break;
        case DS4_TYPE_IQ2_XS: dq_iq2_xs(b, y); break;
        case DS4_TYPE_IQ3_XXS: dq_iq3_xxs(b, y); break;
        case DS4_TYPE_IQ3_S: dq_iq3_s(b, y); break;
        default: return DS4_QUANT_UNSUPPORTED_TYPE;
        }
    }
    return DS4_QUANT_OK;
}

int ds4_dequantize_rows(int type, const uint8_t *src, size_t row_elements, size_t row_begin,
                        size_t row_end, float *dst) {
    size_t be = ds4_block_elements(type);
    if (be == 0) return DS4_QUANT_UNSUPPORTED_TYPE;
    if (row_elements % be != 0 || row_end < row_begin) return DS4_QUANT_BAD_LENGTH;
    size_t row_bytes = row_elements / be * ds4_block_bytes(type);
    return ds4_dequantize(type, src + row_begin * row_bytes, (row_end - row_begin) * row_elements,
                          dst);
}
