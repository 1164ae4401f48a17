/* Per-sequence state of the native forward, owned and laid out by C (docs/adr/0032).
 *
 * One ds4_fw_seq holds, for every layer, the raw KV rows, each compressor's per-token
 * inputs (kv projection and score) and its emitted rows, as growable arrays indexed
 * by absolute position. Older history can be trimmed (each array keeps a `base`);
 * growth is geometric, so a steady decode allocates nothing. The Python session keeps
 * the token list and logits and asks this object to evaluate, rewind, trim, copy and
 * export/import the arrays a DSV4 payload needs. */
#ifndef DS4_SEQ_H
#define DS4_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "ds4_forward.h"

typedef struct ds4_fw_seq ds4_fw_seq;

/* Which array of a layer: raw KV rows, the attention compressor's kv/score inputs and
 * emitted rows, the indexer compressor's. */
enum {
    DS4_SEQ_RAW = 0,
    DS4_SEQ_ATTN_KV = 1,
    DS4_SEQ_ATTN_SCORE = 2,
    DS4_SEQ_ATTN_ROWS = 3,
    DS4_SEQ_INDEX_KV = 4,
    DS4_SEQ_INDEX_SCORE = 5,
    DS4_SEQ_INDEX_ROWS = 6
};

/* An empty sequence for `n_layer` layers shaped as `layers` describes (NULL when out
 * of memory). */
ds4_fw_seq *ds4_fw_seq_new(const ds4_fw_layer *layers, int n_layer);
void ds4_fw_seq_free(ds4_fw_seq *s);

/* A deep copy of every kept row (NULL when out of memory). */
ds4_fw_seq *ds4_fw_seq_clone(const ds4_fw_seq *s);

/* Positions evaluated into the state. */
int64_t ds4_fw_seq_len(const ds4_fw_seq *s);

/* Bytes held by the state's arrays (capacity, not just the rows in use). */
size_t ds4_fw_seq_bytes(const ds4_fw_seq *s);

/* Evaluate `n` tokens at positions len.. through all layers (streams in/out as for
 * ds4_fw_layers_forward). Room is reserved first; on failure the state is left as it
 * was and *failed_layer names the layer. */
int ds4_fw_seq_forward(ds4_fw_seq *s, const ds4_fw_layer *layers, float *streams,
                       const int32_t *tokens, size_t n, const ds4_fw_opts *opt,
                       int *failed_layer);

/* Several sequences in one pass: seqs[i] takes counts[i] tokens at its next positions;
 * streams and tokens hold the rows of seqs[0], then seqs[1], ... Weights are read once
 * for all rows; each sequence's results equal evaluating it alone. The sequences must
 * be distinct and of this model. On failure no state changes and *failed_layer names
 * the layer. */
int ds4_fw_seqs_forward(ds4_fw_seq *const *seqs, const size_t *counts, size_t n_seqs,
                        const ds4_fw_layer *layers, float *streams, const int32_t *tokens,
                        const ds4_fw_opts *opt, int *failed_layer);

/* Drop positions from n on (never below what is kept: see ds4_fw_seq_history_ok). */
void ds4_fw_seq_truncate(ds4_fw_seq *s, int64_t n);

/* Forget per-token history before keep_from, never what the sliding window or a
 * compressor frontier after len positions still reads. Moves rows only once at least
 * half an array's capacity can go (amortised); returns 1 if anything moved. */
int ds4_fw_seq_trim(ds4_fw_seq *s, int64_t keep_from);

/* 1 if the kept history rebuilds the state after m positions exactly. */
int ds4_fw_seq_history_ok(const ds4_fw_seq *s, int64_t m);

/* A read view of one array: rows base..n-1, `width` floats each, row p at
 * data[(p - base) * width]. Returns NULL (and n = base = 0) for an array the layer
 * does not have. */
const float *ds4_fw_seq_rows(const ds4_fw_seq *s, int layer, int which, int64_t *base,
                             int64_t *n, size_t *width);

/* Write `count` rows at positions start.. and make that the array's end; rows between
 * the old end and start become zeros, and an empty array starts at `start`. Returns
 * DS4_FW_BAD_STATE for an array the layer lacks or a start before the kept rows. */
int ds4_fw_seq_set_rows(ds4_fw_seq *s, int layer, int which, int64_t start,
                        const float *rows, size_t count);

/* After an import: the position count the arrays describe (checked by the caller). */
void ds4_fw_seq_set_len(ds4_fw_seq *s, int64_t n);

#endif
