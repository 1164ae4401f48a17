#version 450
#extension GL_GOOGLE_include_directive : require
// F32 weights: one value per step.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint base = rb >> 2;
    for (uint k = gl_LocalInvocationID.x; k < p.cols; k += WG) {
        float w = uintBitsToFloat(wdata[base + k]);
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += w * xval(tok0 + t, k);
    }
}
