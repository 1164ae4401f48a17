#version 450
#extension GL_GOOGLE_include_directive : require
// RoPE on the last n_rot dims of each head, adjacent pairs, in place (docs/vulkan.md#kernels).
// x is (n_tok, n_head, dim); cos/sin tables are (n_tok, n_rot/2), computed on the host
// exactly as the reference computes them (f32 angle iteration, YaRN blend, trig rounded
// once to f32): GPU sin/cos carry no accuracy guarantee at large angles. The rotation is
// `precise` (no contraction), so it rounds exactly like the reference.
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) buffer X { float xdata[]; };
layout(std430, binding = 1) readonly buffer Cos { float cosv[]; };
layout(std430, binding = 2) readonly buffer Sin { float sinv[]; };

layout(push_constant) uniform Params {
    uint n_tok;
    uint n_head;
    uint dim;
    uint n_rot;
    uint inverse;
} p;

void main() {
    uint half_rot = p.n_rot / 2u;
    uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (id >= p.n_tok * p.n_head * half_rot) return;
    uint k = id % half_rot;
    uint head = (id / half_rot) % p.n_head;
    uint tok = id / (half_rot * p.n_head);
    uint at = (tok * p.n_head + head) * p.dim + (p.dim - p.n_rot) + 2u * k;
    float c = cosv[tok * half_rot + k];
    float s = sinv[tok * half_rot + k];
    if (p.inverse != 0u) s = -s;
    float x0 = xdata[at], x1 = xdata[at + 1u];
    precise float a = x0 * c;
    precise float b = x1 * s;
    precise float e = x0 * s;
    precise float f = x1 * c;
    precise float r0 = a - b;
    precise float r1 = e + f;
    xdata[at] = r0;
    xdata[at + 1u] = r1;
}
