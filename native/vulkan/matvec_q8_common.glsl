// Frame of the ds4-numerics matvec kernels (docs/vulkan.md#kernels): weights as raw
// GGUF blocks times activations already quantized on the host exactly as the engine
// quantizes them (Q8_0: int8 per 32 with an f32 scale; Q8_K: int8 per 256 with an f32
// scale and 16 sums of 16 codes). Integer dot per block, the block's f32 scale products
// as the reference applies them; blocks are summed in f32 (in a different order from
// the cpu kernels: the only difference). One workgroup per (row, token).
#include "subgroup.glsl"

#define WG 64
#ifdef GROUPED
#define NT 8  // pairs of one expert per workgroup (a moe_group chunk)
#else
#define NT 1
#endif
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Weights { uint wdata[]; };
layout(std430, binding = 1) readonly buffer Codes { uint codes[]; };   // int8, 4 per word
layout(std430, binding = 2) readonly buffer Scales { float ascale[]; }; // per act block
layout(std430, binding = 3) writeonly buffer Out { float ydata[]; };
layout(std430, binding = 4) readonly buffer Bsums { int bsums[]; };    // Q8_K: 16 per block

layout(push_constant) uniform Params {
    uint rows;
    uint cols;
    uint n_tok;
    uint row_bytes;
    uint w_offset;
#ifdef MOE
    uint x_div;  // activation row of pair q: q / x_div (k: shared per token; 1: its own)
#endif
} p;

#ifdef GROUPED
// The expert-grouped variant (NAME_moe_grouped): workgroup z is a chunk of moe_group's
// table, up to NT pairs of one expert; the invocation's blocks of a row are dotted with
// each pair's codes in turn, so the row's bytes are fetched once per chunk (the later
// pairs hit the cache). Per pair the same terms in the same order as NAME_moe: the
// same bits. Binding 5 is the IQ2_XXS grid (any buffer for other types).
layout(std430, binding = 6) readonly buffer Perm { uint perm[]; };
layout(std430, binding = 7) readonly buffer Chunks { uint chunks[]; };
#elif defined(MOE)
// The expert-indexed variant (built as NAME_moe, docs/vulkan.md#kernels): workgroup z is
// a (token, slot) pair q routed to expert ids[q]; rows is rows per expert. Binding 5 is
// the IQ2_XXS grid (any buffer for other types).
layout(std430, binding = 6) readonly buffer Ids { int ids[]; };
#endif

#include "reduce.glsl"
#ifdef GROUPED
#include "moe_chunk.glsl"
#endif

uint byte_at(uint off) { return (wdata[off >> 2] >> ((off & 3u) * 8u)) & 0xFFu; }
int sbyte_at(uint off) { return int(byte_at(off) << 24) >> 24; }
uint u16_at(uint off) { return (wdata[off >> 2] >> ((off & 2u) * 8u)) & 0xFFFFu; }
float f16_at(uint off) { return unpackHalf2x16(u16_at(off)).x; }
// Activation code k of token t (codes are 4-aligned per token: cols is a block multiple).
int code(uint t, uint k) {
    uint i = t * p.cols + k;
    return int(((codes[i >> 2] >> ((i & 3u) * 8u)) & 0xFFu) << 24) >> 24;
}

float block_term(uint rb, uint t, uint b);  // this block's f32 term, as the reference forms it
uint n_blocks();

#ifdef GROUPED
void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint c = gl_WorkGroupID.z;
    if (row >= p.rows || c >= chunks[0]) return;  // uniform across the workgroup
    uint e, nt;
    uint pair[NT];
    uint xr[NT];
    chunk_pairs(c, e, nt, pair, xr);
    float acc[NT];
    for (uint t = 0; t < NT; ++t) acc[t] = 0.0;
    uint rb = p.w_offset + (e * p.rows + row) * p.row_bytes;
    for (uint b = gl_LocalInvocationID.x; b < n_blocks(); b += WG) {
        for (uint t = 0; t < NT; ++t) if (t < nt) acc[t] += block_term(rb, xr[t], b);
    }
    reduce_all(acc);
    if (gl_LocalInvocationID.x < nt) {
        uint t = gl_LocalInvocationID.x;
        ydata[pair[t] * p.rows + row] = acc[t];
    }
}
#else
void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows) return;
#ifdef MOE
    uint q = gl_WorkGroupID.z;
    uint t = q / p.x_div;
    uint rb = p.w_offset + (uint(ids[q]) * p.rows + row) * p.row_bytes;
#else
    uint q = gl_WorkGroupID.z;
    uint t = q;
    uint rb = p.w_offset + row * p.row_bytes;
#endif
    float acc[NT];
    acc[0] = 0.0;
    for (uint b = gl_LocalInvocationID.x; b < n_blocks(); b += WG) acc[0] += block_term(rb, t, b);
    reduce_all(acc);
    if (gl_LocalInvocationID.x == 0u) ydata[q * p.rows + row] = acc[0];
}
#endif
