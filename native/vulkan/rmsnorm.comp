#version 450
#extension GL_GOOGLE_include_directive : require
// RMSNorm over rows: y = x * (1 / sqrt(mean(x^2) + eps)) [* weight] (docs/vulkan.md#kernels).
// One workgroup per row; the sum of squares is reduced in f32 (the reference sums in f64:
// the difference is far inside the fp32 contract).
#include "subgroup.glsl"
#define WG 64
#define NT 1
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float xdata[]; };
layout(std430, binding = 1) readonly buffer Wt { float weight[]; };
layout(std430, binding = 2) writeonly buffer Y { float ydata[]; };

layout(push_constant) uniform Params {
    uint dim;
    uint n_rows;
    float eps;
    uint has_weight;
} p;

#include "reduce.glsl"

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.n_rows) return;
    uint base = row * p.dim;
    float acc[NT];
    acc[0] = 0.0;
    for (uint k = gl_LocalInvocationID.x; k < p.dim; k += WG) {
        float v = xdata[base + k];
        acc[0] += v * v;
    }
    reduce_all(acc);
    precise float mean = acc[0] / float(p.dim);
    precise float scale = 1.0 / sqrt(mean + p.eps);
    for (uint k = gl_LocalInvocationID.x; k < p.dim; k += WG) {
        precise float y = xdata[base + k] * scale;
        if (p.has_weight != 0u) y = y * weight[k];
        ydata[base + k] = y;
    }
}
