#version 450
#extension GL_GOOGLE_include_directive : require
// BF16 weights: one value per step, widened exactly to f32 (the 16 bits are the top half
// of the f32 word).
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    for (uint k = gl_LocalInvocationID.x; k < p.cols; k += WG) {
        float w = uintBitsToFloat(u16_at(rb + 2u * k) << 16);
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += w * xval(tok0 + t, k);
    }
}
