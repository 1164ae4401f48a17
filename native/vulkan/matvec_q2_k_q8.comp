#version 450
#extension GL_GOOGLE_include_directive : require
// Q2_K weights . Q8_K activation: d_a*d * sum_j sc_j*dot_j - d_a*dmin * sum_j mn_j*bsum_j.
#include "matvec_q8_common.glsl"

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 84u;
    int isum = 0, summs = 0;
    for (uint j = 0; j < 16u; ++j) {
        uint sc = byte_at(off + j);
        uint first = j * 16u;
        uint h = first / 128u, l = (first % 128u) / 32u, j0 = first % 32u;
        int dot = 0;
        for (uint i = 0; i < 16u; ++i) {
            int q = int((byte_at(off + 16u + 32u * h + j0 + i) >> (2u * l)) & 3u);
            dot += q * code(t, b * 256u + first + i);
        }
        isum += int(sc & 15u) * dot;
        summs += int(sc >> 4) * bsums[(t * n_blocks() + b) * 16u + j];
    }
    float da = ascale[t * n_blocks() + b];
    precise float dall = da * f16_at(off + 80u);
    precise float dm = da * f16_at(off + 82u);
    precise float term = dall * float(isum) - dm * float(summs);
    return term;
}
