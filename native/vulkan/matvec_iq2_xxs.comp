#version 450
#extension GL_GOOGLE_include_directive : require
// IQ2_XXS: 66-byte blocks of 256 values: f16 d, then 8 groups of 8 bytes, each 4 grid
// indices (8 values each) and a u32 aux: four 7-bit sign indices and a 4-bit scale ls
// in the top bits; db = d * (0.5 + ls) * 0.25. A grid entry (binding 3, one u16 per
// index) holds 2 bits per value selecting 8, 25 or 43; a sign index's 8th sign makes
// the count of negatives even. One invocation handles one 32-value group per step.
#include "matvec_common.glsl"

layout(std430, binding = 3) readonly buffer Grid { uint grid[]; };

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]) {
    uint ngroups = (p.cols / 256u) * 8u;
    for (uint g = gl_LocalInvocationID.x; g < ngroups; g += WG) {
        uint b = g / 8u, gi = g % 8u;
        uint off = rb + b * 66u;
        float d = f16_at(off);
        uint goff = off + 2u + 8u * gi;
        uint aux = u16_at(goff + 4u) | (u16_at(goff + 6u) << 16);
        float db = d * (0.5 + float(aux >> 28)) * 0.25;
        float part[NT];
        for (uint t = 0; t < NT; ++t) part[t] = 0.0;
        for (uint q = 0; q < 4u; ++q) {
            uint levels = grid[byte_at(goff + q)];
            uint sidx = (aux >> (7u * q)) & 127u;
            uint signs = sidx | ((bitCount(sidx) & 1u) << 7);
            for (uint i = 0; i < 8u; ++i) {
                uint code = (levels >> (2u * i)) & 3u;
                float v = code == 0u ? 8.0 : (code == 1u ? 25.0 : 43.0);
                if (((signs >> i) & 1u) != 0u) v = -v;
                uint k = b * 256u + 32u * gi + 8u * q + i;
                for (uint t = 0; t < NT; ++t) if (t < nt) part[t] += v * xval(tok0 + t, k);
            }
        }
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += db * part[t];
    }
}
