/* Dequantizers for the GGML block formats a DeepSeek V4 GGUF uses.
 * Every function is bit-identical to the numpy reference in
 * ds4.adapters.quant.numpy_codec (which is bit-identical to gguf-py):
 * build with -ffp-contract=off so no multiply-add is fused. */
#ifndef DS4_QUANT_H
#define DS4_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* GGML type ids (the GGUF tensor type field). */
enum {
    DS4_TYPE_F32 = 0,
    DS4_TYPE_F16 = 1,
    DS4_TYPE_Q8_0 = 8,
    DS4_TYPE_Q2_K = 10,
    DS4_TYPE_Q4_K = 12,
    DS4_TYPE_IQ2_XXS = 16,
    DS4_TYPE_BF16 = 30,
    DS4_TYPE_MXFP4 = 39,
    DS4_TYPE_Q3_K = 11,
    DS4_TYPE_Q5_K = 13,
    DS4_TYPE_Q6_K = 14,
    DS4_TYPE_IQ4_NL = 20,
    DS4_TYPE_IQ4_XS = 23,
    DS4_TYPE_IQ2_XS = 17,
    DS4_TYPE_IQ3_XXS = 18,
    DS4_TYPE_IQ3_S = 21
};

/* Return codes. */
enum {
    DS4_QUANT_OK = 0,
    DS4_QUANT_UNSUPPORTED_TYPE = 1,
    DS4_QUANT_BAD_LENGTH = 2
};

float ds4_f16_to_f32(uint16_t bits);

/* Dequantize n_elements values of `type` from src into dst (float32).
 * n_elements must be a whole number of blocks. */
int ds4_dequantize(int type, const uint8_t *src, size_t n_elements, float *dst);

/* Dequantize rows [row_begin, row_end) of a 2-D tensor whose rows hold
 * row_elements values each; dst receives (row_end-row_begin)*row_elements. */
int ds4_dequantize_rows(int type, const uint8_t *src, size_t row_elements,
                        size_t row_begin, size_t row_end, float *dst);

/* Bytes per block and values per block for a supported type; 0 if unsupported. */
size_t ds4_block_bytes(int type);
size_t ds4_block_elements(int type);

#endif
