#version 450
#extension GL_GOOGLE_include_directive : require
// Q6_K: 210-byte blocks of 256 values: ql[128], qh[64], int8 scales[16], f16 d
// (docs/reference/formats.md §4.14). Value v = 128h + r: low nibble r/64 of
// ql[64h + r%64], bits 2(r/32) of qh[32h + r%32] on top, minus 32; w = (d * sc) * q.
// One invocation handles one 16-value sub-block per step.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nsub = (p.cols / 256u) * 16u;
    for (uint s = gl_LocalInvocationID.x; s < nsub; s += WG) {
        uint b = s / 16u, k = s % 16u;
        uint off = rb + b * 210u;
        float dl = f16_at(off + 208u) * float(sbyte_at(off + 192u + k));
        float dot[NT];
        for (uint t = 0; t < NT; ++t) dot[t] = 0.0;
        for (uint i = 0; i < 16u; ++i) {
            uint v = 16u * k + i, h = v / 128u, r = v % 128u;
            uint lo = (byte_at(off + 64u * h + r % 64u) >> (4u * (r / 64u))) & 15u;
            uint hi = (byte_at(off + 128u + 32u * h + r % 32u) >> (2u * (r / 32u))) & 3u;
            float q = float(int(lo | (hi << 4)) - 32);
            for (uint t = 0; t < NT; ++t) if (t < nt) dot[t] += q * xval(tok0 + t, b * 256u + v);
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += dl * dot[t];
    }
}
