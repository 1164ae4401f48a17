#version 450
// y[t][i] = x[t][i] * s (+ b[((pos0 + t) % period)][i]) over n_rows rows of dim
// (docs/vulkan.md#kernels): the compressor score (gate + ape at the token's position in
// its window; s = 1). Each product and sum is one f32 rounding,
// as the reference's numpy expression rounds it (`precise`: no contraction).
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float xdata[]; };
layout(std430, binding = 1) readonly buffer B { float bdata[]; };
layout(std430, binding = 2) writeonly buffer Y { float ydata[]; };

layout(push_constant) uniform Params {
    uint n_rows;
    uint dim;
    float s;
    uint has_b;
    uint pos0;
    uint period;
} p;

void main() {
    uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (id >= p.n_rows * p.dim) return;
    uint t = id / p.dim;
    uint i = id % p.dim;
    precise float y = xdata[id] * p.s;
    if (p.has_b != 0u) y = y + bdata[((p.pos0 + t) % p.period) * p.dim + i];
    ydata[id] = y;
}
