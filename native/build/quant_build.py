"""cffi builder for ds4._native_quant (run by the package build, never at import)."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
    float ds4_f16_to_f32(uint16_t bits);
    int ds4_dequantize(int type, const uint8_t *src, size_t n_elements, float *dst);
    int ds4_dequantize_rows(int type, const uint8_t *src, size_t row_elements,
                            size_t row_begin, size_t row_end, float *dst);
    size_t ds4_block_bytes(int type);
    size_t ds4_block_elements(int type);
    """
)
ffibuilder.set_source(
    "ds4._native_quant",
    '#include "ds4_quant.h"',
    sources=["native/quant/ds4_quant.c"],
    include_dirs=["native/quant", "native/common"],
    # No fused multiply-add: the dequantizers must be bit-identical to numpy.
    extra_compile_args=["-O2", "-std=c11", "-ffp-contract=off", "-fno-fast-math"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
