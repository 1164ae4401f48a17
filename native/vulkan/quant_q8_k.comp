#version 450
#extension GL_GOOGLE_include_directive : require
// Q8_K activation quantization on the device, bit for bit the engine's quantize_q8_k
// (docs/vulkan.md#kernels): per block of 256, mx = the first value of largest |x|
// (signed), iscale = -127 / mx, d = 1 / iscale (both rounded to f32 as the host divides),
// code = rint(x * iscale) clipped to [-128, 127], and the 16 sums of 16 codes. One
// workgroup of 64 per block, 4 values (one packed code word) per invocation.
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer X { float xdata[]; };
layout(std430, binding = 1) writeonly buffer Codes { uint codes[]; };
layout(std430, binding = 2) writeonly buffer Scales { float scales[]; };
layout(std430, binding = 3) writeonly buffer Bsums { int bsums[]; };

layout(push_constant) uniform Params {
    uint n_blocks;  // n_tok * cols / 256
    uint x_offset;
} p;

#include "div_rn.glsl"

shared float best_abs[WG];
shared uint best_at[WG];
shared int part[WG];

void main() {
    uint b = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (b >= p.n_blocks) return;  // uniform per workgroup
    uint lid = gl_LocalInvocationID.x;
    uint base = p.x_offset + b * 256u;
    float v[4];
    float a = -1.0;
    uint at = 0u;
    for (uint i = 0u; i < 4u; ++i) {
        v[i] = xdata[base + 4u * lid + i];
        if (abs(v[i]) > a) { a = abs(v[i]); at = 4u * lid + i; }  // first of equals
    }
    best_abs[lid] = a;
    best_at[lid] = at;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) {
            float o = best_abs[lid + s];
            uint oa = best_at[lid + s];
            if (o > best_abs[lid] || (o == best_abs[lid] && oa < best_at[lid])) {
                best_abs[lid] = o;
                best_at[lid] = oa;
            }
        }
        barrier();
    }
    float mx = xdata[base + best_at[0]];
    float iscale = mx != 0.0 ? div_rn(-127.0, mx) : 0.0;
    float d = mx != 0.0 ? div_rn(1.0, iscale) : 0.0;
    int c[4];
    for (uint i = 0u; i < 4u; ++i) {
        precise float q = v[i] * iscale;
        c[i] = code_of(q);
    }
    codes[b * 64u + lid] = pack4(c[0], c[1], c[2], c[3]);
    part[lid] = c[0] + c[1] + c[2] + c[3];
    barrier();
    if (lid < 16u) {
        bsums[b * 16u + lid] =
            part[4u * lid] + part[4u * lid + 1u] + part[4u * lid + 2u] + part[4u * lid + 3u];
    }
    if (lid == 0u) scales[b] = d;
}
