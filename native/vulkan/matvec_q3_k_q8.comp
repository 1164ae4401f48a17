#version 450
#extension GL_GOOGLE_include_directive : require
// Q3_K weights . Q8_K activation: (d * d_a) * sum_k s_k * dot_k, s_k the signed 6-bit
// sub-block scale (docs/reference/formats.md §5.13).
#include "matvec_q8_common.glsl"

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 110u;
    int isum = 0;
    for (uint k = 0; k < 16u; ++k) {
        uint lo = k < 8u ? (byte_at(off + 96u + k) & 15u) : (byte_at(off + 88u + k) >> 4);
        uint hi = (byte_at(off + 104u + k % 4u) >> (2u * (k / 4u))) & 3u;
        int dot = 0;
        for (uint i = 0; i < 16u; ++i) {
            uint v = 16u * k + i, h = v / 128u, j = (v % 128u) / 32u, l = v % 32u;
            int q = int((byte_at(off + 32u + 32u * h + l) >> (2u * j)) & 3u)
                  - (((byte_at(off + l) >> (v / 32u)) & 1u) != 0u ? 0 : 4);
            dot += q * code(t, b * 256u + v);
        }
        isum += (int(lo | (hi << 4)) - 32) * dot;
    }
    float da = ascale[t * n_blocks() + b];
    precise float term = (f16_at(off + 108u) * da) * float(isum);
    return term;
}
