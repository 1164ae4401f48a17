#version 450
// The first HC streams of a chunk (docs/vulkan.md#kernels): each token's embedding row,
// read from the resident F16, BF16 or F32 token_embd blocks and widened to f32 (exact), copied
// into all n_hc streams: y[t][h][i] = E[ids[t]][i].
#define WG 64
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer W { uint wdata[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Y { float ydata[]; };

layout(push_constant) uniform Params {
    uint n_tok;
    uint dim;
    uint n_hc;
    uint row_words;  // 32-bit words per embedding row
    uint half_kind;  // 0: F32, 1: F16, 2: BF16
} p;

void main() {
    uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (id >= p.n_tok * p.dim) return;
    uint t = id / p.dim;
    uint i = id % p.dim;
    uint base = ids[t] * p.row_words;
    float v;
    if (p.half_kind == 1u) {
        vec2 pair = unpackHalf2x16(wdata[base + i / 2u]);
        v = (i & 1u) != 0u ? pair.y : pair.x;
    } else if (p.half_kind == 2u) {
        uint word = wdata[base + i / 2u];
        v = uintBitsToFloat((i & 1u) != 0u ? (word & 0xFFFF0000u) : (word << 16));
    } else {
        v = uintBitsToFloat(wdata[base + i]);
    }
    for (uint h = 0u; h < p.n_hc; ++h) ydata[(t * p.n_hc + h) * p.dim + i] = v;
}
