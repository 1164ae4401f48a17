#version 450
#extension GL_GOOGLE_include_directive : require
// IQ3_XXS weights . Q8_K activation (docs/reference/formats.md §5.12): per block
// bsum = sum over 32-value runs of m * (signed grid . codes), exact in int32, then
// post * ((d * d_a) * bsum) with post = 0.25 (exact: a power of two), as the reference.
#include "matvec_q8_common.glsl"

layout(std430, binding = 5) readonly buffer Grid { uint grid[]; };
#include "iq_grid_fields.glsl"

uint n_blocks() { return p.cols / 256u; }

float block_term(uint rb, uint t, uint b) {
    uint off = rb + b * 98u;
    int bsum = 0;
    for (uint v0 = 0u; v0 < 256u; v0 += 32u) {
        int dot = 0;
        for (uint j = 0; j < 32u; ++j) {
            bool neg;
            int v = int(iq3xxs_value(off, v0 + j, neg));
            dot += (neg ? -v : v) * code(t, b * 256u + v0 + j);
        }
        bsum += iq3xxs_mult(off, v0) * dot;
    }
    precise float ds = f16_at(off) * ascale[t * n_blocks() + b];
    precise float term = 0.25 * (ds * float(bsum));
    return term;
}
