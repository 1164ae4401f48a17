/* Two small pieces beside the layer: the MTP block's input projection (docs/mtp.md) and
 * directional steering of a sublayer output (docs/steering.md). Same strict arithmetic as
 * the rest of the forward: f64 RMSNorm sums, weight products through ds4_fw_matmul. */
#include "fwd_internal.h"

int ds4_fw_mtp_input_forward(const ds4_fw_mtp_input *M, const float *emb, const float *hprev,
                             size_t n, float *x_in, const ds4_fw_opts *opt) {
    size_t D = (size_t)M->n_embd, S = (size_t)M->n_hc;
    if (M->n_hc < 1 || M->n_hc > DS4_FW_MAX_HC) return DS4_CPU_BAD_SHAPE;
    if (M->e_proj.rows != D || M->e_proj.cols != D || M->h_proj.rows != D || M->h_proj.cols != D)
        return DS4_CPU_BAD_SHAPE;
    if (n == 0) return DS4_CPU_OK;
    size_t mark = ds4_scratch_mark();
    float *e = ds4_scratch_alloc(n * D * sizeof *e);
    float *ep = ds4_scratch_alloc(n * D * sizeof *ep);
    float *hn = ds4_scratch_alloc(n * S * D * sizeof *hn);
    int rc = e && ep && hn ? DS4_CPU_OK : DS4_CPU_NO_MEMORY;
    if (!rc) {
        for (size_t t = 0; t < n; t++) ds4_fw_rmsnorm(emb + t * D, M->enorm, D, M->rms_eps, e + t * D);
        for (size_t r = 0; r < n * S; r++)
            ds4_fw_rmsnorm(hprev + r * D, M->hnorm, D, M->rms_eps, hn + r * D);
        rc = ds4_fw_matmul(&M->e_proj, 0, D, e, D, n, ep, D, opt->impl);
    }
    /* every stream of every row is its own product: x_in receives h_proj . hn directly */
    if (!rc) rc = ds4_fw_matmul(&M->h_proj, 0, D, hn, D, n * S, x_in, D, opt->impl);
    if (!rc) {
        for (size_t t = 0; t < n; t++)
            for (size_t s = 0; s < S; s++) {
                float *xs = x_in + (t * S + s) * D;
                const float *et = ep + t * D;
                for (size_t d = 0; d < D; d++) xs[d] = et[d] + xs[d];
            }
    }
    ds4_scratch_reset(mark);
    return rc;
}

void ds4_fw_steer_rows(float *y, size_t n, size_t dim, const float *v, float scale) {
    for (size_t t = 0; t < n; t++) {
        float *row = y + t * dim;
        float dot = 0.0f;
        for (size_t i = 0; i < dim; i++) dot += v[i] * row[i];
        float k = scale * dot;
        for (size_t i = 0; i < dim; i++) row[i] = row[i] - k * v[i];
    }
}
