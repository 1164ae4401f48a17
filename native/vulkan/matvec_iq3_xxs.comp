#version 450
#extension GL_GOOGLE_include_directive : require
// IQ3_XXS (docs/reference/formats.md §4.12): 98-byte blocks of 256 values; w = (d * m * post) * g * sign
// with m = 2s + 1 per 32-value run, post = 0.25, g the codebook value (binding 3: the grid).
// One invocation handles one 32-value run per step.
#include "matvec_common.glsl"

layout(std430, binding = 3) readonly buffer Grid { uint grid[]; };
#include "iq_grid_fields.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nruns = (p.cols / 256u) * (256u / 32u);
    for (uint g = gl_LocalInvocationID.x; g < nruns; g += WG) {
        uint b = g / (256u / 32u), v0 = (g % (256u / 32u)) * 32u;
        uint off = rb + b * 98u;
        float db = f16_at(off) * float(iq3xxs_mult(off, v0)) * 0.25;
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint j = 0; j < 32u; ++j) {
            bool neg;
            float v = float(iq3xxs_value(off, v0 + j, neg));
            if (neg) v = -v;
            uint k = b * 256u + v0 + j;
            for (uint t = 0; t < NT; ++t) if (t < nt) part[t] += v * xval(tok0 + t, k);
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += db * part[t];
    }
}
