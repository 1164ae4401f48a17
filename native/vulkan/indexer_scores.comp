#version 450
#extension GL_GOOGLE_include_directive : require
// Lightning-indexer scores (docs/vulkan.md#kernels, docs/reference/model.md §3.5):
// score[t][c] = sum_h max(0, rows[c] . iq[t][h]) * w[t][h] for the compressed rows
// c < (pos0 + t + 1) / ratio that query t (at position pos0 + t) can see. One workgroup
// per (row, query); invocations take heads, the head terms are summed over the workgroup.
#include "subgroup.glsl"
#define WG 64
#define NT 1
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Rows { float rows[]; };    // (n_rows, dim)
layout(std430, binding = 1) readonly buffer Iq { float iq[]; };        // (n_q, n_head, dim)
layout(std430, binding = 2) readonly buffer Wt { float wts[]; };       // (n_q, n_head)
layout(std430, binding = 3) writeonly buffer Scores { float scores[]; };  // (n_q, stride)

layout(push_constant) uniform Params {
    uint n_q;
    uint n_head;
    uint dim;
    uint pos0;
    uint ratio;
    uint stride;
    float w_scale;  // the weights' scale 1/sqrt(dim * n_head), applied to w as the reference does
} p;

#include "reduce.glsl"

void main() {
    uint c = gl_WorkGroupID.x;
    uint t = gl_WorkGroupID.y;
    if (c >= (p.pos0 + t + 1u) / p.ratio) return;  // uniform per workgroup
    float acc[NT];
    acc[0] = 0.0;
    for (uint h = gl_LocalInvocationID.x; h < p.n_head; h += WG) {
        uint qb = (t * p.n_head + h) * p.dim;
        float dot = 0.0;
        for (uint j = 0u; j < p.dim; ++j) dot += rows[c * p.dim + j] * iq[qb + j];
        precise float w = wts[t * p.n_head + h] * p.w_scale;
        acc[0] += max(dot, 0.0) * w;
    }
    reduce_all(acc);
    if (gl_LocalInvocationID.x == 0u) scores[t * p.stride + c] = acc[0];
}
