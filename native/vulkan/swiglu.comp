#version 450
// Clamped SwiGLU (docs/vulkan.md#kernels): out = silu(min(gate, c)) * clip(up, -c, c)
// [* w[row]] elementwise, the clamp only where c > 1e-6, silu(x) = x * sigmoid(x) in
// the stable form; each product rounded on its own, as the reference forms it.
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) readonly buffer Wts { float wts[]; };
layout(std430, binding = 3) writeonly buffer Out { float outv[]; };

layout(push_constant) uniform Params {
    uint n_rows;
    uint dim;
    float limit;
    uint weighted;
} p;

void main() {
    uint idx = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * WG
               + gl_LocalInvocationID.x;
    if (idx >= p.n_rows * p.dim) return;
    float g = gate[idx];
    float u = up[idx];
    if (p.limit > 1e-6) {
        g = min(g, p.limit);
        u = clamp(u, -p.limit, p.limit);
    }
    float e = exp(-abs(g));
    precise float d = 1.0 + e;
    float sig = g >= 0.0 ? 1.0 / d : e / d;
    precise float silu = g * sig;
    precise float y = silu * u;
    if (p.weighted != 0u) y = y * wts[idx / p.dim];
    outv[idx] = y;
}
