#version 450
#extension GL_GOOGLE_include_directive : require
// Q5_K: 176-byte blocks of 256 values: f16 d, f16 dmin, Q4_K's 12 packed (scale, min)
// bytes, qh[32], qs[128] (docs/reference/formats.md §4.14). Sub-block j of 32: code =
// nibble j%2 of qs[32(j/2) + l] | (bit j of qh[l]) << 4; w = d*sc*q - dmin*mn.
// One invocation handles one 32-value sub-block per step.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nsub = (p.cols / 256u) * 8u;
    for (uint s = gl_LocalInvocationID.x; s < nsub; s += WG) {
        uint b = s / 8u, j = s % 8u;
        uint off = rb + b * 176u;
        uint sc, mn;
        if (j < 4u) {
            sc = byte_at(off + 4u + j) & 63u;
            mn = byte_at(off + 8u + j) & 63u;
        } else {
            sc = (byte_at(off + 8u + j) & 15u) | ((byte_at(off + j) >> 6) << 4);
            mn = (byte_at(off + 8u + j) >> 4) | ((byte_at(off + 4u + j) >> 6) << 4);
        }
        float dl = f16_at(off) * float(sc), ml = f16_at(off + 2u) * float(mn);
        uint qoff = off + 48u + 32u * (j / 2u), shift = 4u * (j % 2u);
        float dot[NT], sum[NT];
        for (uint t = 0; t < NT; ++t) { dot[t] = 0.0; sum[t] = 0.0; }
        for (uint i = 0; i < 32u; ++i) {
            uint q = ((byte_at(qoff + i) >> shift) & 15u) | (((byte_at(off + 16u + i) >> j) & 1u) << 4);
            uint k = b * 256u + 32u * j + i;
            for (uint t = 0; t < NT; ++t) if (t < nt) {
                float x = xval(tok0 + t, k);
                dot[t] += float(q) * x;
                sum[t] += x;
            }
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += dl * dot[t] - ml * sum[t];
    }
}
