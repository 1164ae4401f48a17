#version 450
#extension GL_GOOGLE_include_directive : require
// IQ4_NL weights . Q8_0 activation (docs/reference/formats.md §5.11):
// (d * d_a) * sum(kvalue[code] * q_a) per 32-value block, as the CPU kernels.
#include "matvec_q8_common.glsl"
#include "iq4_levels.glsl"

uint n_blocks() { return p.cols / 32u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 18u;
    int isum = 0;
    for (uint j = 0; j < 16u; ++j) {
        uint q = byte_at(off + 2u + j);
        isum += IQ4_KVALUES[q & 15u] * code(t, b * 32u + j);
        isum += IQ4_KVALUES[q >> 4] * code(t, b * 32u + j + 16u);
    }
    precise float ds = f16_at(off) * ascale[t * (p.cols / 32u) + b];
    precise float term = ds * float(isum);
    return term;
}
