/* Native forward pass of one DeepSeek V4 layer (docs/reference/model.md §3.2–3.9) and the output
 * head (docs/reference/model.md §3.10), in the exact operation order of the spec: sequential f32
 * reductions from 0, libm f32 transcendentals, reciprocal-multiply normalisers, f64 RMSNorm sums.
 * Weight products go through the dot kernels of ds4_cpu.h; with the scalar kernels
 * the whole pass is the spec's strict arithmetic ("exact" numerics), with SIMD kernels
 * only the weight dot products are reassociated.
 *
 * The per-sequence state lives in caller-owned arrays indexed by absolute position
 * (the Python session keeps them so it can rewind and snapshot); the caller reserves
 * room for the chunk before each call. */
#ifndef DS4_FORWARD_H
#define DS4_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "ds4_cpu.h"

enum {
    DS4_FW_BAD_STATE = 20,   /* state arrays missing or too small */
    DS4_FW_BAD_TOKEN = 21,   /* hash routing: token outside the tid2eid table */
    DS4_FW_OVERFLOW = 22     /* compressed-row capacity exceeded */
};

/* The routed-expert cache of SSD streaming (ds4_expert_cache.h); opaque here. */
typedef struct ds4_xc ds4_xc;

/* A weight matrix in GGUF blocks; data == NULL when the tensor is absent. */
typedef struct {
    const uint8_t *data;
    size_t row_stride;     /* bytes between rows */
    size_t expert_stride;  /* bytes between experts (3-D expert tensors) */
    size_t rows, cols;
    int type;              /* ggml type id */
    int x8;                /* routed Q2_K experts interleaved by 8 (ADR 0067); 0 = GGUF rows */
} ds4_fw_mat;

typedef struct ds4_fw_layer {
    /* shape */
    int n_embd, n_hc, n_head, head_dim, n_rot, q_rank, o_rank, n_groups;
    int n_swa, ratio, has_indexer, n_idx_head, idx_dim, idx_top_k;
    int n_expert, n_used, n_ff, hash_layer, norm_route, sinkhorn_iters;
    size_t n_vocab;  /* rows of tid2eid's token axis */
    float rms_eps, hc_eps, clamp, route_scale;
    /* RoPE: base, and the per-pair YaRN ramp (n_rot/2 values; NULL = no YaRN) */
    float rope_base, yarn_factor;
    const float *yarn_ramp;
    const float *rope_inv_freq;  /* n_rot/2 angles per position (YaRN-blended), for
                                    the direct pos * inv_freq form of fp32 numerics */
    /* matrices */
    ds4_fw_mat hc_attn_fn, q_a, q_b, kv, out_a, out_b;
    ds4_fw_mat comp_kv, comp_gate, idx_kv, idx_gate, idx_q_b, idx_proj;
    ds4_fw_mat hc_ffn_fn, gate_inp, gate_exps, up_exps, down_exps, gate_sh, up_sh, down_sh;
    /* small vectors as f32 (ape rows: ratio x width, row-major) */
    const float *hc_attn_scale, *hc_attn_base, *attn_norm, *q_a_norm, *kv_norm, *sinks;
    const float *comp_ape, *comp_norm, *idx_ape, *idx_norm;
    const float *hc_ffn_scale, *hc_ffn_base, *ffn_norm, *probs_bias;
    const int32_t *tid2eid;  /* [n_vocab][n_used], NULL unless hash_layer */
    /* SSD streaming: when xc is set, routed experts come from the cache (entry
     * (layer_id, expert)) instead of gate/up/down_exps.data, with the same bytes. */
    ds4_xc *xc;
    int layer_id;
    /* SSD streaming read-ahead: the next layer, whose router, applied to this layer's FFN
     * input, predicts the experts it will use (NULL: no read-ahead from this layer). */
    const struct ds4_fw_layer *next;
    /* The MTP block (docs/mtp.md): attend to the kept raw rows only, when its window
     * starts after a gap (positions whose main-model state is unknown). 0 elsewhere. */
    int window_from_kept;
    /* Directional steering (docs/steering.md): y -= scale * v * dot(v, y) on the
     * attention output (steer_attn) and the FFN output (steer_ffn) before HC post;
     * steer_dir = NULL or a scale of 0 leaves the sublayer untouched. */
    const float *steer_dir;
    float steer_attn, steer_ffn;
    /* Activation capture (docs/steering.md): when set, the attention / FFN output of the
     * last row of each call (after steering, before HC post) is copied here. */
    float *capture_attn, *capture_ffn;
} ds4_fw_layer;

/* One compressor's history: per-token projections (kv, score = gate + ape) of position
 * p at row p - base, `width` = lanes * row_width values each, and the emitted rows. */
typedef struct {
    float *kv, *score;    /* rows base .. pos0 + n - 1 */
    int64_t base;         /* oldest kept position (older history was trimmed) */
    float *rows;          /* capacity rows_cap */
    size_t n_rows, rows_cap;
} ds4_fw_comp;

typedef struct {
    float *raw;           /* stored KV of position p at row p - raw_base */
    int64_t raw_base;
    ds4_fw_comp attn, index;
} ds4_fw_state;

typedef struct {
    int impl;             /* DS4_CPU_IMPL_*; SCALAR = the strict arithmetic */
    int kv_rounding;      /* FP8 E4M3 on KV rows, f16 rounding of cached rows */
    int indexer_qat;      /* Hadamard + FP4 on indexer rows and queries */
    int iterated_rope;    /* ds4's iterated f32 angle; 0 = pos * rope_inv_freq[k] */
} ds4_fw_opts;

/* Advance `n` tokens at positions pos0.. through one layer: streams (n, n_hc, n_embd)
 * in/out, tokens (n,) for hash routing. Rows pos0..pos0+n-1 of the state are written,
 * compressed rows appended (n_rows updated). */
int ds4_fw_layer_forward(const ds4_fw_layer *L, ds4_fw_state *S, float *streams,
                         const int32_t *tokens, int64_t pos0, size_t n,
                         const ds4_fw_opts *opt);

/* One layer over rows of several sequences: row t is at position rpos[t] of the
 * sequence whose state is rs[t] (rows of one state in position order). Weight products
 * run over all n rows at once; each row's result equals a one-row call's. */
int ds4_fw_layer_forward_rows(const ds4_fw_layer *L, ds4_fw_state *const *rs,
                              const int64_t *rpos, float *streams, const int32_t *tokens,
                              size_t n, const ds4_fw_opts *opt);

/* All layers in order (layers[i] with states[i]); on failure *failed_layer names the
 * layer whose error is returned. */
int ds4_fw_layers_forward(const ds4_fw_layer *layers, ds4_fw_state *states, int n_layer,
                          float *streams, const int32_t *tokens, int64_t pos0, size_t n,
                          const ds4_fw_opts *opt, int *failed_layer);

typedef struct {
    int n_embd, n_hc;
    float rms_eps, hc_eps;
    ds4_fw_mat hc_fn, output;
    const float *hc_scale, *hc_base, *norm;
} ds4_fw_head;

/* The MTP block's input (docs/mtp.md): per row t, with e = rmsnorm(emb[t], enorm),
 * x_in[t][s] = e_proj . e + h_proj . rmsnorm(hprev[t][s], hnorm) for every stream s.
 * emb (n, n_embd), hprev and x_in (n, n_hc, n_embd). */
typedef struct {
    int n_embd, n_hc;
    float rms_eps;
    ds4_fw_mat e_proj, h_proj;
    const float *enorm, *hnorm;
} ds4_fw_mtp_input;

int ds4_fw_mtp_input_forward(const ds4_fw_mtp_input *M, const float *emb, const float *hprev,
                             size_t n, float *x_in, const ds4_fw_opts *opt);

/* y -= scale * v * dot(v, y) for n rows of `dim` values (dot accumulated in f32, in
 * index order): directional steering, exported for tests. */
void ds4_fw_steer_rows(float *y, size_t n, size_t dim, const float *v, float scale);

/* Logits (n, output.rows) from final streams (n, n_hc, n_embd). */
int ds4_fw_head_forward(const ds4_fw_head *H, const float *streams, size_t n, float *logits,
                        const ds4_fw_opts *opt);

/* The strict primitives, exported for tests. */
void ds4_fw_rmsnorm(const float *x, const float *w, size_t n, float eps, float *y);
void ds4_fw_rope(float *tail, int n_rot, int64_t pos, float base, float yarn_factor,
                 const float *ramp, int inverse);
void ds4_fw_rope_direct(float *tail, int n_rot, int64_t pos, const float *inv_freq,
                        int inverse);
void ds4_fw_fp8_kv_sim(float *v, size_t n_nope);
void ds4_fw_fp4_sim(float *v, size_t n);
void ds4_fw_hadamard128(float *v);
/* The indexer top-k: allowed[i] = 1 for the k highest of n scores (ties to the lower
 * index, NaN lowest); fullsort is the plain sorting form (tests, bench). */
int ds4_fw_topk_mask(const float *scores, size_t n, size_t k, unsigned char *allowed);
int ds4_fw_topk_mask_fullsort(const float *scores, size_t n, size_t k, unsigned char *allowed);
void ds4_fw_hc_split(const float *mix, const float *scale, const float *base, int n_hc,
                     int iters, float eps, float *pre, float *post, float *comb);

#endif
