/* Quantizers for the GGML block formats ds4 writes (docs/reference/formats.md §4, §6).
 * Output is byte-identical to the numpy reference in
 * ds4.adapters.quant.block_quantizers: every sum runs left to right from its first
 * term, every running max/min/argmin keeps the first winner, and the build uses
 * -ffp-contract=off so no multiply-add is fused. */
#ifndef DS4_QUANTIZE_H
#define DS4_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

/* GGML type ids (the GGUF tensor type field). */
enum {
    DS4Q_TYPE_F32 = 0,
    DS4Q_TYPE_F16 = 1,
    DS4Q_TYPE_Q8_0 = 8,
    DS4Q_TYPE_Q2_K = 10,
    DS4Q_TYPE_Q4_K = 12,
    DS4Q_TYPE_IQ2_XXS = 16,
    DS4Q_TYPE_BF16 = 30,
    DS4Q_TYPE_MXFP4 = 39,
    DS4Q_TYPE_Q3_K = 11,
    DS4Q_TYPE_Q5_K = 13,
    DS4Q_TYPE_Q6_K = 14
};

/* Return codes. */
enum {
    DS4Q_OK = 0,
    DS4Q_UNSUPPORTED_TYPE = 1,
    DS4Q_BAD_LENGTH = 2,
    DS4Q_NOT_INITIALISED = 3,
    DS4Q_NO_MEMORY = 4,
    DS4Q_NEEDS_IMPORTANCE = 5
};

/* Build the IQ2_XXS search tables. Call once before any IQ2_XXS quantization and
 * before starting threads; later calls do nothing. */
int ds4_quantize_init(void);

/* Bytes of one quantized row of row_elements values; 0 if the type is unsupported
 * or row_elements is not a whole number of blocks. */
size_t ds4_quantize_row_bytes(int type, size_t row_elements);

/* Quantize n_rows rows of row_elements float32 values into dst (n_rows * row bytes).
 * importance: row_elements non-negative weights shared by all rows, or NULL (the
 * "ref" paths for Q2_K/Q4_K; ignored by the float types and Q8_0; IQ2_XXS needs it).
 * Thread-safe for disjoint dst ranges once ds4_quantize_init has returned. */
int ds4_quantize_rows(int type, const float *src, size_t n_rows, size_t row_elements,
                      const float *importance, uint8_t *dst);

#endif
