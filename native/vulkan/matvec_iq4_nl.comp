#version 450
#extension GL_GOOGLE_include_directive : require
// IQ4_NL (docs/reference/formats.md §4.9): 18-byte blocks of 32 values, an f16 scale d then
// 16 code bytes; value j is the low nibble of code byte j, value j + 16 its high nibble,
// and w = d * kvalue[code].
#include "matvec_common.glsl"
#include "iq4_levels.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nb = p.cols / 32u;
    for (uint b = gl_LocalInvocationID.x; b < nb; b += WG) {
        uint off = rb + b * 18u;
        float d = f16_at(off);
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint j = 0; j < 16u; ++j) {
            uint q = byte_at(off + 2u + j);
            float lo = float(IQ4_KVALUES[q & 15u]);
            float hi = float(IQ4_KVALUES[q >> 4]);
            for (uint t = 0; t < NT; ++t) {
                if (t < nt) {
                    part[t] += lo * xval(tok0 + t, b * 32u + j);
                    part[t] += hi * xval(tok0 + t, b * 32u + j + 16u);
                }
            }
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += d * part[t];
    }
}
