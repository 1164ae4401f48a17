#version 450
#extension GL_GOOGLE_include_directive : require
// Q8_0 weights . Q8_0 activation: (d_w * d_a) * sum(q_w * q_a) per 32-value block.
#include "matvec_q8_common.glsl"

uint n_blocks() { return p.cols / 32u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 34u;
    int isum = 0;
    for (uint j = 0; j < 32u; ++j) isum += sbyte_at(off + 2u + j) * code(t, b * 32u + j);
    precise float ds = f16_at(off) * ascale[t * (p.cols / 32u) + b];
    precise float term = ds * float(isum);
    return term;
}
