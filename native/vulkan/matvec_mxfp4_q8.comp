#version 450
#extension GL_GOOGLE_include_directive : require
// MXFP4 weights . Q8_0 activation (docs/reference/formats.md §5.10):
// (2^(e-128) * d_a) * sum(kvalue[code] * q_a) per 32-value block, as the CPU kernels.
#include "matvec_q8_common.glsl"

const int MXFP4_KVALUES[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);

float e8m0_half(uint e) {
    return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
}

uint n_blocks() { return p.cols / 32u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 17u;
    int isum = 0;
    for (uint j = 0; j < 16u; ++j) {
        uint q = byte_at(off + 1u + j);
        isum += MXFP4_KVALUES[q & 15u] * code(t, b * 32u + j);
        isum += MXFP4_KVALUES[q >> 4] * code(t, b * 32u + j + 16u);
    }
    precise float ds = e8m0_half(byte_at(off)) * ascale[t * (p.cols / 32u) + b];
    precise float term = ds * float(isum);
    return term;
}
