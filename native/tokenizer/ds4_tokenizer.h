/* Native fast path of the DeepSeek V4 tokenizer: added-token split, the official
 * pre-tokenizer (digit runs of 1-3, CJK runs, the main regex) and byte-level BPE.
 * The pure-Python reference is ds4.adapters.tokenizer.bpe; both must
 * give identical ids. Tokens are ids only here: the Python side resolves strings. */
#ifndef DS4_TOKENIZER_H
#define DS4_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ds4_tokenizer ds4_tokenizer;

/* byte_ids[b]: id of the one-byte symbol of byte b (all 256 must be >= 0).
 * Merge r joins (merge_left[r], merge_right[r]) into merge_result[r]; the lower r
 * applies first; if a pair repeats, the later rank wins (as in HF tokenizers).
 * Added token i has UTF-8 bytes added_text[added_offsets[i] .. added_offsets[i+1]),
 * id added_ids[i]; added_early[i] != 0 puts it in the first matching pass.
 * Returns NULL on bad arguments or out of memory. */
ds4_tokenizer *ds4_tok_create(const int32_t *byte_ids, int32_t n_merges,
                              const int32_t *merge_left, const int32_t *merge_right,
                              const int32_t *merge_result, int32_t n_added,
                              const uint8_t *added_text, const int64_t *added_offsets,
                              const int32_t *added_ids, const uint8_t *added_early);
void ds4_tok_destroy(ds4_tokenizer *tok);

/* Encode `len` bytes of UTF-8 into `out`, which must hold `len` ids (a token never
 * covers less than one byte). Returns the number of ids, or -1 when out of memory. */
int64_t ds4_tok_encode(const ds4_tokenizer *tok, const uint8_t *text, int64_t len,
                       int32_t *out);

/* Pre-tokenize plain text (no added-token split): writes the byte offset where
 * each piece ends into `ends` (room for `len` entries); returns the piece count,
 * or -1 when out of memory. */
int64_t ds4_tok_pretokenize(const uint8_t *text, int64_t len, int64_t *ends);

/* The pre-tokenizer class of a code point: 0 other, 1 letter/mark, 2 number,
 * 3 punctuation/symbol, 4 white space. */
int ds4_tok_char_class(uint32_t cp);

#endif
