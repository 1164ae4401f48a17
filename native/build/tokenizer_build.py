"""cffi builder for ds4._native_tokenizer (run by the package build, never at import)."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
    typedef struct ds4_tokenizer ds4_tokenizer;
    ds4_tokenizer *ds4_tok_create(const int32_t *byte_ids, int32_t n_merges,
                                  const int32_t *merge_left, const int32_t *merge_right,
                                  const int32_t *merge_result, int32_t n_added,
                                  const uint8_t *added_text, const int64_t *added_offsets,
                                  const int32_t *added_ids, const uint8_t *added_early);
    void ds4_tok_destroy(ds4_tokenizer *tok);
    int64_t ds4_tok_encode(const ds4_tokenizer *tok, const uint8_t *text, int64_t len,
                           int32_t *out);
    int64_t ds4_tok_pretokenize(const uint8_t *text, int64_t len, int64_t *ends);
    int ds4_tok_char_class(uint32_t cp);
    """
)
ffibuilder.set_source(
    "ds4._native_tokenizer",
    '#include "ds4_tokenizer.h"',
    sources=["native/tokenizer/ds4_tokenizer.c", "native/tokenizer/ds4_pretokenize.c"],
    include_dirs=["native/tokenizer"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
