#version 450
#extension GL_GOOGLE_include_directive : require
// Q5_K weights . Q8_K activation, as Q4_K: (d_a*d) * sum_j sc_j*dot_j
// - (d_a*dmin) * sum_j mn_j*pair_j (docs/reference/formats.md §5.13).
#include "matvec_q8_common.glsl"

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 176u;
    int isum = 0, summs = 0;
    for (uint j = 0; j < 8u; ++j) {
        uint sc, mn;
        if (j < 4u) {
            sc = byte_at(off + 4u + j) & 63u;
            mn = byte_at(off + 8u + j) & 63u;
        } else {
            sc = (byte_at(off + 8u + j) & 15u) | ((byte_at(off + j) >> 6) << 4);
            mn = (byte_at(off + 8u + j) >> 4) | ((byte_at(off + 4u + j) >> 6) << 4);
        }
        uint qoff = off + 48u + 32u * (j / 2u), shift = 4u * (j % 2u);
        int dot = 0;
        for (uint i = 0; i < 32u; ++i) {
            uint q = ((byte_at(qoff + i) >> shift) & 15u) | (((byte_at(off + 16u + i) >> j) & 1u) << 4);
            dot += int(q) * code(t, b * 256u + 32u * j + i);
        }
        uint bs = (t * n_blocks() + b) * 16u + 2u * j;
        isum += int(sc) * dot;
        summs += int(mn) * (bsums[bs] + bsums[bs + 1u]);
    }
    float da = ascale[t * n_blocks() + b];
    precise float t1 = (da * f16_at(off)) * float(isum);
    precise float t2 = (da * f16_at(off + 2u)) * float(summs);
    precise float term = t1 - t2;
    return term;
}
