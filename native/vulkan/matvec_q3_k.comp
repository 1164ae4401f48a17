#version 450
#extension GL_GOOGLE_include_directive : require
// Q3_K: 110-byte blocks of 256 values: hmask[32], qs[64], 12 bytes of packed 6-bit
// scales (s - 32) for 16 sub-blocks of 16, f16 d (docs/reference/formats.md §4.14).
// w = (d * s) * q, q = ((qs[32h + l] >> 2j) & 3) - 4 * (1 - hmask bit v/32).
// One invocation handles one 16-value sub-block per step.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nsub = (p.cols / 256u) * 16u;
    for (uint s = gl_LocalInvocationID.x; s < nsub; s += WG) {
        uint b = s / 16u, k = s % 16u;
        uint off = rb + b * 110u;
        uint lo = k < 8u ? (byte_at(off + 96u + k) & 15u) : (byte_at(off + 88u + k) >> 4);
        uint hi = (byte_at(off + 104u + k % 4u) >> (2u * (k / 4u))) & 3u;
        float dl = f16_at(off + 108u) * float(int(lo | (hi << 4)) - 32);
        float dot[NT];
        for (uint t = 0; t < NT; ++t) dot[t] = 0.0;
        for (uint i = 0; i < 16u; ++i) {
            uint v = 16u * k + i, h = v / 128u, j = (v % 128u) / 32u, l = v % 32u;
            int q = int((byte_at(off + 32u + 32u * h + l) >> (2u * j)) & 3u)
                  - (((byte_at(off + l) >> (v / 32u)) & 1u) != 0u ? 0 : 4);
            for (uint t = 0; t < NT; ++t) if (t < nt) dot[t] += float(q) * xval(tok0 + t, b * 256u + v);
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += dl * dot[t];
    }
}
