#version 450
#extension GL_GOOGLE_include_directive : require
// Q2_K: 84-byte blocks of 256 values: 16 scale bytes (low nibble scale, high nibble min),
// 64 bytes of 2-bit codes, f16 d, f16 dmin. Value i = 128*h + 32*l + j has code
// (qs[32*h + j] >> 2*l) & 3 and sub-block i/16: w = d*sc*code - dmin*mn.
// One invocation handles one 16-value sub-block per step.
#include "matvec_common.glsl"

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint nsub = (p.cols / 256u) * 16u;
    for (uint s = gl_LocalInvocationID.x; s < nsub; s += WG) {
        uint b = s / 16u, sb = s % 16u;
        uint off = rb + b * 84u;
        float d = f16_at(off + 80u), dmin = f16_at(off + 82u);
        uint sc = byte_at(off + sb);
        float dl = d * float(sc & 15u), ml = dmin * float(sc >> 4);
        uint first = sb * 16u;  // value index of the sub-block's first value
        uint h = first / 128u, l = (first % 128u) / 32u, j0 = first % 32u;
        float dot[NT], sum[NT];
        for (uint t = 0; t < NT; ++t) { dot[t] = 0.0; sum[t] = 0.0; }
        for (uint j = 0; j < 16u; ++j) {
            float q = float((byte_at(off + 16u + 32u * h + j0 + j) >> (2u * l)) & 3u);
            uint k = b * 256u + first + j;
            for (uint t = 0; t < NT; ++t) if (t < nt) {
                float x = xval(tok0 + t, k);
                dot[t] += q * x;
                sum[t] += x;
            }
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += dl * dot[t] - ml * sum[t];
    }
}
