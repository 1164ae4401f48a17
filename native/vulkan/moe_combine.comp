#version 450
// The FFN output (docs/vulkan.md#kernels): out[t] = ((0 + c[t, 0]) + c[t, 1] + ...) +
// shared[t], the k weighted expert outputs summed slot by slot as the reference does,
// then the shared expert's. One invocation per (token, dim).
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Contrib { float contrib[]; };
layout(std430, binding = 1) readonly buffer Shared { float shexp[]; };
layout(std430, binding = 2) writeonly buffer Out { float outv[]; };

layout(push_constant) uniform Params {
    uint n_tok;
    uint k;
    uint dim;
    uint has_shared;
} p;

void main() {
    uint idx = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * WG
               + gl_LocalInvocationID.x;
    if (idx >= p.n_tok * p.dim) return;
    uint t = idx / p.dim;
    uint d = idx % p.dim;
    precise float acc = 0.0;
    for (uint s = 0; s < p.k; ++s) acc = acc + contrib[(t * p.k + s) * p.dim + d];
    if (p.has_shared != 0u) acc = acc + shexp[idx];
    outv[idx] = acc;
}
