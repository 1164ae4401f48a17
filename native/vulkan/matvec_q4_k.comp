#version 450
#extension GL_GOOGLE_include_directive : require
// Q4_K: 144-byte blocks of 256 values: f16 d, f16 dmin, 12 bytes of packed 6-bit
// (scale, min) pairs for 8 sub-blocks of 32, then 128 bytes of 4-bit codes. Sub-block j
// takes the low (even j) or high (odd j) nibbles of bytes 32*(j/2) .. +32:
// w = d*sc*q - dmin*mn. One invocation handles one 32-value sub-block per step.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nsub = (p.cols / 256u) * 8u;
    for (uint s = gl_LocalInvocationID.x; s < nsub; s += WG) {
        uint b = s / 8u, j = s % 8u;
        uint off = rb + b * 144u;
        float d = f16_at(off), dmin = f16_at(off + 2u);
        uint sc, mn;
        if (j < 4u) {
            sc = byte_at(off + 4u + j) & 63u;
            mn = byte_at(off + 8u + j) & 63u;
        } else {
            sc = (byte_at(off + 8u + j) & 15u) | ((byte_at(off + j) >> 6) << 4);
            mn = (byte_at(off + 8u + j) >> 4) | ((byte_at(off + 4u + j) >> 6) << 4);
        }
        float dl = d * float(sc), ml = dmin * float(mn);
        uint qoff = off + 16u + 32u * (j / 2u);
        uint shift = 4u * (j % 2u);
        float dot[NT], sum[NT];
        for (uint t = 0; t < NT; ++t) { dot[t] = 0.0; sum[t] = 0.0; }
        for (uint i = 0; i < 32u; ++i) {
            float q = float((byte_at(qoff + i) >> shift) & 15u);
            uint k = b * 256u + 32u * j + i;
            for (uint t = 0; t < NT; ++t) if (t < nt) {
                float x = xval(tok0 + t, k);
                dot[t] += q * x;
                sum[t] += x;
            }
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += dl * dot[t] - ml * sum[t];
    }
}
