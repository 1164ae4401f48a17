#version 450
#extension GL_GOOGLE_include_directive : require
// Attention with sinks for one query token (docs/vulkan.md#kernels): q (H, Dh) over rows
// (N, Dh) used as both K and V; head h's sink logit joins the softmax denominator
// unscaled and carries no value. One workgroup per head: scores to a scratch buffer,
// max and sum reduced across the workgroup, then each invocation owns output dims.
#include "subgroup.glsl"
#define WG 64
#define NT 1
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer Rows { float rows[]; };
layout(std430, binding = 2) readonly buffer Sinks { float sinks[]; };
layout(std430, binding = 3) coherent buffer Scores { float scores[]; };
layout(std430, binding = 4) writeonly buffer Out { float outv[]; };

layout(push_constant) uniform Params {
    uint n_head;
    uint n_rows;
    uint dim;
    float scale;
} p;

#include "reduce.glsl"

shared float red_max[WG];

float max_all(float v) {
    uint lid = gl_LocalInvocationID.x;
    red_max[lid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red_max[lid] = max(red_max[lid], red_max[lid + s]);
        barrier();
    }
    float m = red_max[0];
    barrier();
    return m;
}

void main() {
    uint h = gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    uint sbase = h * p.n_rows;
    float local_max = -3.402823466e38;
    for (uint n = lid; n < p.n_rows; n += WG) {
        float dot = 0.0;
        for (uint d = 0; d < p.dim; ++d) dot += q[h * p.dim + d] * rows[n * p.dim + d];
        float s = dot * p.scale;
        scores[sbase + n] = s;
        local_max = max(local_max, s);
    }
    float mx = max(max_all(local_max), sinks[h]);
    float acc[NT];
    acc[0] = 0.0;
    for (uint n = lid; n < p.n_rows; n += WG) {
        float w = exp(scores[sbase + n] - mx);
        scores[sbase + n] = w;
        acc[0] += w;
    }
    reduce_all(acc);
    memoryBarrierBuffer();  // every invocation's weights are visible to all before the sum
    barrier();
    float inv = 1.0 / (exp(sinks[h] - mx) + acc[0]);
    for (uint d = lid; d < p.dim; d += WG) {
        float o = 0.0;
        for (uint n = 0; n < p.n_rows; ++n) o += scores[sbase + n] * rows[n * p.dim + d];
        outv[h * p.dim + d] = o * inv;
    }
}
