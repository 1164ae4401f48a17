#version 450
#extension GL_GOOGLE_include_directive : require
// IQ4_XS weights . Q8_K activation (docs/reference/formats.md §5.11): per 256-value block
// isum = sum_i (s_i - 32) * sum(kvalue[code] * q_a) over the 8 runs, exact in int32, then
// (d * d_a) * isum, as the CPU kernels.
#include "matvec_q8_common.glsl"
#include "iq4_levels.glsl"

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 136u;
    int isum = 0;
    for (uint i = 0; i < 8u; ++i) {
        int run = 0;
        for (uint j = 0; j < 16u; ++j) {
            uint q = byte_at(off + 8u + 16u * i + j);
            run += IQ4_KVALUES[q & 15u] * code(t, b * 256u + 32u * i + j);
            run += IQ4_KVALUES[q >> 4] * code(t, b * 256u + 32u * i + j + 16u);
        }
        isum += iq4_xs_scale(off, i) * run;
    }
    precise float ds = f16_at(off) * ascale[t * n_blocks() + b];
    precise float term = ds * float(isum);
    return term;
}
