#version 450
#extension GL_GOOGLE_include_directive : require
// MXFP4 (docs/reference/formats.md §4.8): 17-byte blocks of 32 values, an E8M0 scale
// byte e then 16 code bytes; value j is the low nibble of code byte j, value j + 16 its
// high nibble, and w = kvalue[code] * 2^(e - 128) (kvalues: the doubled E2M1 values).
#include "matvec_common.glsl"

const int MXFP4_KVALUES[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

// 2^(e - 128) exactly: bytes 0 and 1 are the subnormals 2^-128 and 2^-127.
float e8m0_half(uint e) {
    return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
}

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nb = p.cols / 32u;
    for (uint b = gl_LocalInvocationID.x; b < nb; b += WG) {
        uint off = rb + b * 17u;
        float d = e8m0_half(byte_at(off));
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint j = 0; j < 16u; ++j) {
            uint q = byte_at(off + 1u + j);
            float lo = float(MXFP4_KVALUES[q & 15u]);
            float hi = float(MXFP4_KVALUES[q >> 4]);
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
