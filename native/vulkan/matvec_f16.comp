#version 450
#extension GL_GOOGLE_include_directive : require
// F16 weights: one value per step, widened exactly to f32.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    for (uint k = gl_LocalInvocationID.x; k < p.cols; k += WG) {
        float w = f16_at(rb + 2u * k);
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += w * xval(tok0 + t, k);
    }
}
