#version 450
// HC post (docs/vulkan.md#kernels): out[j] = post[j] * y + sum_i comb[i][j] * streams[i]
// per token and dim, summed source by source in order (each step rounded: `precise`).
// One invocation per (token, dim); split is hc_split's (n, 2S + S*S) [pre, post, comb].
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer Streams { float streams[]; };
layout(std430, binding = 2) readonly buffer Split { float split[]; };
layout(std430, binding = 3) writeonly buffer Out { float outv[]; };

layout(push_constant) uniform Params {
    uint n_tok;
    uint n_hc;
    uint dim;
} p;

void main() {
    uint idx = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * WG
               + gl_LocalInvocationID.x;
    if (idx >= p.n_tok * p.dim) return;
    uint t = idx / p.dim;
    uint d = idx % p.dim;
    uint s = p.n_hc;
    uint mb = t * (2u * s + s * s);
    uint sb = t * s * p.dim;
    float yv = y[idx];
    for (uint j = 0; j < s; ++j) {
        precise float acc = split[mb + s + j] * yv;
        for (uint i = 0; i < s; ++i) {
            acc = acc + split[mb + 2u * s + i * s + j] * streams[sb + i * p.dim + d];
        }
        outv[sb + j * p.dim + d] = acc;
    }
}
