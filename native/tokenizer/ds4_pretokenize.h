/* Internal interface of the pre-tokenizer scanner (ds4_pretokenize.c). */
#ifndef DS4_PRETOKENIZE_H
#define DS4_PRETOKENIZE_H

#include <stdint.h>
#include <stdlib.h>

/* A text decoded to code points: cp[i] starts at byte off[i]; off[n] is the length. */
typedef struct {
    uint32_t *cp;
    int64_t *off;
    uint8_t *cls;
    int64_t n;
    int64_t cap;
} ds4_pt_text;

/* Receives each piece as code point indices [begin, end); non-zero aborts. */
typedef int (*ds4_pt_emit)(void *ctx, int64_t begin, int64_t end);

int ds4_pt_decode(ds4_pt_text *t, const uint8_t *s, int64_t n);
int ds4_pt_split(const ds4_pt_text *t, ds4_pt_emit emit, void *ctx);
void ds4_pt_free(ds4_pt_text *t);

#endif
