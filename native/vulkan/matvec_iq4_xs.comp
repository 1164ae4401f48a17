#version 450
#extension GL_GOOGLE_include_directive : require
// IQ4_XS (docs/reference/formats.md §4.10): 136-byte blocks of 256 values: f16 d, a u16 of
// the eight sub-blocks' high scale bits, 4 bytes of their low bits, then 8 runs of 16
// code bytes (IQ4_NL's layout); w = (d * (s_i - 32)) * kvalue[code].
#include "matvec_common.glsl"
#include "iq4_levels.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nsub = p.cols / 32u;  // one invocation per 32-value sub-block
    for (uint sb = gl_LocalInvocationID.x; sb < nsub; sb += WG) {
        uint off = rb + (sb / 8u) * 136u;
        uint i = sb & 7u;
        float dl = f16_at(off) * float(iq4_xs_scale(off, i));
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint j = 0; j < 16u; ++j) {
            uint q = byte_at(off + 8u + 16u * i + j);
            float lo = float(IQ4_KVALUES[q & 15u]);
            float hi = float(IQ4_KVALUES[q >> 4]);
            for (uint t = 0; t < NT; ++t) {
                if (t < nt) {
                    part[t] += lo * xval(tok0 + t, sb * 32u + j);
                    part[t] += hi * xval(tok0 + t, sb * 32u + j + 16u);
                }
            }
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += dl * part[t];
    }
}
