/* Quantizer entry points: row dispatch, float encoders and Q8_0
 * (docs/reference/formats.md §4.2, §6.3); twin of adapters/quant/numpy_codec.py. */
#include "ds4_quantize.h"

#include "qz_internal.h"

static uint16_t f32_to_bf16(float f) {
    uint32_t b = qz_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

static void q8_0_block(const float *x, uint8_t *out) {
    float amax = 0;
    for (int i = 0; i < 32; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    float d = amax / 127.0f;
    float inv = d == 0 ? 0 : 1.0f / d;
    qz_put_u16(out, qz_f32_to_f16(d));
    for (int i = 0; i < 32; i++) {
        float v = x[i] * inv;
        /* A subnormal d makes 1/d overflow; its f16 scale is 0, so codes are moot. */
        float q = isfinite(v) ? roundf(v) : 0;
        if (q > 127) q = 127;
        if (q < -127) q = -127;
        out[2 + i] = (uint8_t)(int8_t)q;
    }
}

/* MXFP4 as gguf-py encodes it (docs/reference/formats.md §4.8): scale byte
 * floor(log2f(amax)) + 125 wrapped to 8 bits (0 for zero, NaN or infinite amax; glibc's
 * log2f floors exactly as numpy's float32 log2), then the first nearest of 16 codes. */
static const int8_t MXFP4_KVALUES[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void mxfp4_block(const float *x, uint8_t *out) {
    float amax = 0;
    int nan = 0;
    for (int i = 0; i < 32; i++) {
        float a = fabsf(x[i]);
        if (a != a) nan = 1;
        if (a > amax) amax = a;
    }
    uint8_t e = 0;
    if (!nan && amax > 0 && isfinite(amax)) e = (uint8_t)(((int)floorf(log2f(amax)) + 125) & 0xff);
    float d = qz_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
    out[0] = e;
    memset(out + 1, 0, 16);
    for (int i = 0; i < 32; i++) {
        int best = 0;
        float best_err = fabsf((float)MXFP4_KVALUES[0] * d - x[i]);
        for (int k = 1; k < 16; k++) {
            float err = fabsf((float)MXFP4_KVALUES[k] * d - x[i]);
            if (err < best_err) {
                best = k;
                best_err = err;
            }
        }
        out[1 + i % 16] |= (uint8_t)(best << (i < 16 ? 0 : 4));
    }
}

static size_t block_elements(int type) {
    switch (type) {
    case DS4Q_TYPE_F32:
    case DS4Q_TYPE_F16:
    case DS4Q_TYPE_BF16: return 1;
    case DS4Q_TYPE_Q8_0:
    case DS4Q_TYPE_MXFP4: return 32;
    case DS4Q_TYPE_Q2_K:
    case DS4Q_TYPE_Q4_K:
    case DS4Q_TYPE_IQ2_XXS:
    case DS4Q_TYPE_Q3_K:
    case DS4Q_TYPE_Q5_K:
    case DS4Q_TYPE_Q6_K: return 256;
    default: return 0;
    }
}

static size_t block_bytes(int type) {
    switch (type) {
    case DS4Q_TYPE_F32: return 4;
    case DS4Q_TYPE_F16:
    case DS4Q_TYPE_BF16: return 2;
    case DS4Q_TYPE_Q8_0: return 34;
    case DS4Q_TYPE_Q2_K: return 84;
    case DS4Q_TYPE_Q4_K: return 144;
    case DS4Q_TYPE_IQ2_XXS: return 66;
    case DS4Q_TYPE_MXFP4: return 17;
    case DS4Q_TYPE_Q3_K: return 110;
    case DS4Q_TYPE_Q5_K: return 176;
    case DS4Q_TYPE_Q6_K: return 210;
    default: return 0;
    }
}

int ds4_quantize_init(void) { return qz_iq2_xxs_init() ? DS4Q_NO_MEMORY : DS4Q_OK; }

size_t ds4_quantize_row_bytes(int type, size_t row_elements) {
    size_t be = block_elements(type);
    if (!be || row_elements % be) return 0;
    return row_elements / be * block_bytes(type);
}

static void quantize_row(int type, const float *x, size_t n, const float *imp, uint8_t *out) {
    switch (type) {
    case DS4Q_TYPE_F32: memcpy(out, x, n * 4); return; /* little-endian hosts only */
    case DS4Q_TYPE_F16:
        for (size_t i = 0; i < n; i++) qz_put_u16(out + 2 * i, qz_f32_to_f16(x[i]));
        return;
    case DS4Q_TYPE_BF16:
        for (size_t i = 0; i < n; i++) qz_put_u16(out + 2 * i, f32_to_bf16(x[i]));
        return;
    default: break;
    }
    size_t be = block_elements(type), bb = block_bytes(type);
    for (size_t b = 0; b < n / be; b++) {
        const float *xb = x + b * be;
        const float *ib = imp ? imp + b * be : NULL;
        uint8_t *ob = out + b * bb;
        switch (type) {
        case DS4Q_TYPE_Q8_0: q8_0_block(xb, ob); break;
        case DS4Q_TYPE_Q2_K: qz_q2_k_block(xb, ib, ob); break;
        case DS4Q_TYPE_Q4_K: qz_q4_k_block(xb, ib, ob); break;
        case DS4Q_TYPE_IQ2_XXS: qz_iq2_xxs_block(xb, ib, ob); break;
        case DS4Q_TYPE_MXFP4: mxfp4_block(xb, ob); break;
        case DS4Q_TYPE_Q3_K: qz_q3_k_block(xb, ob); break;
        case DS4Q_TYPE_Q5_K: qz_q5_k_block(xb, ib, ob); break;
        case DS4Q_TYPE_Q6_K: qz_q6_k_block(xb, ob); break;
        default: break;
        }
    }
}

int ds4_quantize_rows(int type, const float *src, size_t n_rows, size_t row_elements,
                      const float *importance, uint8_t *dst) {
    if (!block_elements(type)) return DS4Q_UNSUPPORTED_TYPE;
    size_t row_bytes = ds4_quantize_row_bytes(type, row_elements);
    if (!row_bytes) return DS4Q_BAD_LENGTH;
    if (type == DS4Q_TYPE_IQ2_XXS) {
        if (!importance) return DS4Q_NEEDS_IMPORTANCE;
        if (!qz_iq2_xxs_ready()) return DS4Q_NOT_INITIALISED;
    }
    for (size_t r = 0; r < n_rows; r++)
        quantize_row(type, src + r * row_elements, row_elements, importance, dst + r * row_bytes);
    return DS4Q_OK;
}
