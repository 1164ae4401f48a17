#version 450
#extension GL_GOOGLE_include_directive : require
// IQ2_XS (docs/reference/formats.md §4.11): 74-byte blocks of 256 values; w = (d * m * post) * g * sign
// with m = 2s + 1 per 16-value run, post = 0.125, g the codebook value (binding 3: the grid).
// One invocation handles one 16-value run per step.
#include "matvec_common.glsl"

layout(std430, binding = 3) readonly buffer Grid { uint grid[]; };
#include "iq_grid_fields.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nruns = (p.cols / 256u) * (256u / 16u);
    for (uint g = gl_LocalInvocationID.x; g < nruns; g += WG) {
        uint b = g / (256u / 16u), v0 = (g % (256u / 16u)) * 16u;
        uint off = rb + b * 74u;
        float db = f16_at(off) * float(iq2xs_mult(off, v0)) * 0.125;
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint j = 0; j < 16u; ++j) {
            bool neg;
            float v = float(iq2xs_value(off, v0 + j, neg));
            if (neg) v = -v;
            uint k = b * 256u + v0 + j;
            for (uint t = 0; t < NT; ++t) if (t < nt) part[t] += v * xval(tok0 + t, k);
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += db * part[t];
    }
}
