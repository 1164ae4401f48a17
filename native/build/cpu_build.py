"""cffi builder for ds4._native_cpu (run by the package build, never at import)."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
    typedef struct { float d; int8_t q[256]; int16_t bsums[16]; } ds4_block_q8k;
    typedef struct { float d; int8_t q[32]; } ds4_block_q8a;
    typedef struct {
        const uint8_t *base; size_t expert_stride; size_t row_stride; int type;
    } ds4_cpu_experts;

    int ds4_cpu_impl_available(int impl);
    int ds4_cpu_best_impl(void);
    int ds4_cpu_set_threads(int n_threads);
    int ds4_cpu_threads(void);
    void ds4_cpu_quantize_q8a(const float *x, size_t n, ds4_block_q8a *out);
    int ds4_cpu_quantize_q8k(const float *x, size_t n, ds4_block_q8k *out);
    size_t ds4_cpu_row_bytes(int type, size_t cols);
    int ds4_cpu_matmul(int type, const uint8_t *w, size_t row_stride, size_t rows,
                       size_t cols, const float *x, size_t n_tok, float *y, int impl);
    int ds4_cpu_moe(const float *x, size_t n_embd, size_t n_ff, size_t n_expert,
                    const ds4_cpu_experts *gate, const ds4_cpu_experts *up,
                    const ds4_cpu_experts *down, const int32_t *expert_ids,
                    const float *route_weights, size_t n_used, float clamp, float *out,
                    int impl);
    uint64_t ds4_cpu_probe_macs(int kind, uint64_t iters_per_thread);

    typedef struct {
        const uint8_t *data; size_t row_stride; size_t expert_stride;
        size_t rows, cols; int type;
    } ds4_fw_mat;
    typedef struct {
        int n_embd, n_hc, n_head, head_dim, n_rot, q_rank, o_rank, n_groups;
        int n_swa, ratio, has_indexer, n_idx_head, idx_dim, idx_top_k;
        int n_expert, n_used, n_ff, hash_layer, norm_route, sinkhorn_iters;
        size_t n_vocab;
        float rms_eps, hc_eps, clamp, route_scale;
        float rope_base, yarn_factor;
        const float *yarn_ramp;
        const float *rope_inv_freq;
        ds4_fw_mat hc_attn_fn, q_a, q_b, kv, out_a, out_b;
        ds4_fw_mat comp_kv, comp_gate, idx_kv, idx_gate, idx_q_b, idx_proj;
        ds4_fw_mat hc_ffn_fn, gate_inp, gate_exps, up_exps, down_exps, gate_sh, up_sh, down_sh;
        const float *hc_attn_scale, *hc_attn_base, *attn_norm, *q_a_norm, *kv_norm, *sinks;
        const float *comp_ape, *comp_norm, *idx_ape, *idx_norm;
        const float *hc_ffn_scale, *hc_ffn_base, *ffn_norm, *probs_bias;
        const int32_t *tid2eid;
    } ds4_fw_layer;
    typedef struct {
        float *kv, *score; int64_t base; float *rows; size_t n_rows, rows_cap;
    } ds4_fw_comp;
    typedef struct { float *raw; int64_t raw_base; ds4_fw_comp attn, index; } ds4_fw_state;
    typedef struct { int impl, kv_rounding, indexer_qat, iterated_rope; } ds4_fw_opts;
    typedef struct {
        int n_embd, n_hc; float rms_eps, hc_eps;
        ds4_fw_mat hc_fn, output;
        const float *hc_scale, *hc_base, *norm;
    } ds4_fw_head;

    int ds4_fw_layer_forward(const ds4_fw_layer *L, ds4_fw_state *S, float *streams,
                             const int32_t *tokens, int64_t pos0, size_t n,
                             const ds4_fw_opts *opt);
    int ds4_fw_layers_forward(const ds4_fw_layer *layers, ds4_fw_state *states, int n_layer,
                              float *streams, const int32_t *tokens, int64_t pos0, size_t n,
                              const ds4_fw_opts *opt, int *failed_layer);
    int ds4_fw_head_forward(const ds4_fw_head *H, const float *streams, size_t n,
                            float *logits, const ds4_fw_opts *opt);
    void ds4_fw_rmsnorm(const float *x, const float *w, size_t n, float eps, float *y);
    void ds4_fw_rope(float *tail, int n_rot, int64_t pos, float base, float yarn_factor,
                     const float *ramp, int inverse);
    void ds4_fw_rope_direct(float *tail, int n_rot, int64_t pos, const float *inv_freq,
                            int inverse);
    void ds4_fw_fp8_kv_sim(float *v, size_t n_nope);
    void ds4_fw_fp4_sim(float *v, size_t n);
    void ds4_fw_hadamard128(float *v);
    void ds4_fw_hc_split(const float *mix, const float *scale, const float *base, int n_hc,
                         int iters, float eps, float *pre, float *post, float *comb);
    """
)
ffibuilder.set_source(
    "ds4._native_cpu",
    '#include "ds4_cpu.h"\n#include "ds4_forward.h"',
    sources=[
        "native/cpu/cpu_actquant.c",
        "native/cpu/cpu_dot_scalar.c",
        "native/cpu/cpu_dot_avx2.c",
        "native/cpu/cpu_dot_neon.c",
        "native/cpu/cpu_matmul.c",
        "native/cpu/cpu_moe.c",
        "native/cpu/cpu_pool.c",
        "native/cpu/cpu_probe.c",
        "native/cpu/cpu_tables.c",
        "native/cpu/fwd_attn.c",
        "native/cpu/fwd_ffn.c",
        "native/cpu/fwd_layer.c",
        "native/cpu/fwd_matmul.c",
        "native/cpu/fwd_ops.c",
        "native/cpu/fwd_vec.c",
    ],
    include_dirs=["native/cpu", "native/common"],
    # No contraction and no fast-math: the scalar kernels must round exactly like the
    # numpy reference. SIMD code asks for AVX2/FMA (x86-64) or SDOT (aarch64) per function
    # (target attributes), so one build runs on any CPU of its architecture and picks the
    # kernels at run time.
    extra_compile_args=[
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-ffp-contract=off",
        "-fno-fast-math",
        "-pthread",
        "-D_GNU_SOURCE",
    ],
    extra_link_args=["-pthread"],
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
