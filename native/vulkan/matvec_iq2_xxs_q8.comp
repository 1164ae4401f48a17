#version 450
#extension GL_GOOGLE_include_directive : require
// IQ2_XXS weights . Q8_K activation: 0.125 * (d*d_a) * sum_g (2*ls_g + 1) * dot_g over the
// 8 groups of 32 (integer signed grid values; the 0.125 is applied after the block sum,
// as the reference does, which is exact scaling by a power of two).
#include "matvec_q8_common.glsl"

layout(std430, binding = 5) readonly buffer Grid { uint grid[]; };

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 66u;
    int bsum = 0;
    for (uint g = 0; g < 8u; ++g) {
        uint goff = off + 2u + 8u * g;
        uint aux = u16_at(goff + 4u) | (u16_at(goff + 6u) << 16);
        int dot = 0;
        for (uint q = 0; q < 4u; ++q) {
            uint levels = grid[byte_at(goff + q)];
            uint sidx = (aux >> (7u * q)) & 127u;
            uint signs = sidx | ((bitCount(sidx) & 1u) << 7);
            for (uint i = 0; i < 8u; ++i) {
                uint c = (levels >> (2u * i)) & 3u;
                int v = c == 0u ? 8 : (c == 1u ? 25 : 43);
                if (((signs >> i) & 1u) != 0u) v = -v;
                dot += v * code(t, b * 256u + 32u * g + 8u * q + i);
            }
        }
        bsum += dot * int(2u * (aux >> 28) + 1u);
    }
    precise float ds = f16_at(off) * ascale[t * n_blocks() + b];
    precise float term = 0.125 * (ds * float(bsum));
    return term;
}
