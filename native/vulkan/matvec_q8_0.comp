#version 450
#extension GL_GOOGLE_include_directive : require
// Q8_0: 34-byte blocks of 32 values, f16 scale d then 32 int8 codes; w = d * q.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nb = p.cols / 32u;
    for (uint b = gl_LocalInvocationID.x; b < nb; b += WG) {
        uint off = rb + b * 34u;
        float d = f16_at(off);
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint j = 0; j < 32u; ++j) {
            float q = float(sbyte_at(off + 2u + j));
            for (uint t = 0; t < NT; ++t) if (t < nt) part[t] += q * xval(tok0 + t, b * 32u + j);
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += d * part[t];
    }
}
