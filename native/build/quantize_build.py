"""cffi builder for ds4._native_quantize (run by the package build, never at import)."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
    int ds4_quantize_init(void);
    size_t ds4_quantize_row_bytes(int type, size_t row_elements);
    int ds4_quantize_rows(int type, const float *src, size_t n_rows, size_t row_elements,
                          const float *importance, uint8_t *dst);
    """
)
ffibuilder.set_source(
    "ds4._native_quantize",
    '#include "ds4_quantize.h"',
    sources=[
        "native/quantize/ds4_quantize.c",
        "native/quantize/qz_half.c",
        "native/quantize/qz_search.c",
        "native/quantize/qz_kquants.c",
        "native/quantize/qz_iq2xxs.c",
    ],
    include_dirs=["native/quantize", "native/common"],
    # No fused multiply-add and no reassociation: byte-identical to the numpy reference.
    extra_compile_args=["-O2", "-std=c11", "-ffp-contract=off", "-fno-fast-math"],
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
