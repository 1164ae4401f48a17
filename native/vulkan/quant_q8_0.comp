#version 450
#extension GL_GOOGLE_include_directive : require
// Q8_0 activation quantization on the device, bit for bit the engine's quantize_q8_0
// (docs/vulkan.md#kernels): per block of 32, d = amax / 127 rounded to f32, inv = 1 / d,
// code = rint(x * inv) clipped to [-128, 127]. One invocation per block; the codes are
// packed 4 per word in the layout the matvec_*_q8 kernels read.
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float xdata[]; };
layout(std430, binding = 1) writeonly buffer Codes { uint codes[]; };
layout(std430, binding = 2) writeonly buffer Scales { float scales[]; };

layout(push_constant) uniform Params {
    uint n_blocks;  // n_tok * cols / 32: blocks are contiguous across tokens
    uint x_offset;  // first float of x in its buffer
} p;

#include "div_rn.glsl"

void main() {
    uint b = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (b >= p.n_blocks) return;
    uint base = p.x_offset + b * 32u;
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(xdata[base + j]));
    float d = div_rn(amax, 127.0);
    float inv = d != 0.0 ? div_rn(1.0, d) : 0.0;
    for (uint w = 0u; w < 8u; ++w) {
        int c[4];
        for (uint i = 0u; i < 4u; ++i) {
            precise float v = xdata[base + 4u * w + i] * inv;
            c[i] = code_of(v);
        }
        codes[b * 8u + w] = pack4(c[0], c[1], c[2], c[3]);
    }
    scales[b] = d;
}
