#version 450
#extension GL_GOOGLE_include_directive : require
// Q6_K weights . Q8_K activation: (d * d_a) * sum_k sc_k * dot_k, sc_k the int8
// sub-block scale (docs/reference/formats.md §5.13).
#include "matvec_q8_common.glsl"

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 210u;
    int isum = 0;
    for (uint k = 0; k < 16u; ++k) {
        int dot = 0;
        for (uint i = 0; i < 16u; ++i) {
            uint v = 16u * k + i, h = v / 128u, r = v % 128u;
            uint lo = (byte_at(off + 64u * h + r % 64u) >> (4u * (r / 64u))) & 15u;
            uint hi = (byte_at(off + 128u + 32u * h + r % 32u) >> (2u * (r / 32u))) & 3u;
            dot += (int(lo | (hi << 4)) - 32) * code(t, b * 256u + v);
        }
        isum += sbyte_at(off + 192u + k) * dot;
    }
    float da = ascale[t * n_blocks() + b];
    precise float term = (f16_at(off + 208u) * da) * float(isum);
    return term;
}
