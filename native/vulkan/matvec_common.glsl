// Shared frame of the quantized matvec/matmul kernels (docs/vulkan.md#kernels).
//
// y[t][row] = sum_k W[row][k] * x[t][k] for raw GGUF weight rows W (row_bytes bytes each,
// read as 32-bit words and picked apart here; no dequantized copy exists anywhere) and
// f32 activations x. One workgroup per (row, group of NT tokens): the weights of a row
// are decoded once for NT tokens. Token loops run to the constant NT (guarded by nt) so
// the per-token accumulators stay in registers. Each kernel file defines row_partial(), which adds
// its invocation's share of the row to acc[t] for the nt tokens from tok0.
#include "subgroup.glsl"

#define WG 64
#ifndef NT
#define NT 8  // tokens per workgroup; the build also makes an NT=1 (decode) variant
#endif
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Weights { uint wdata[]; };
layout(std430, binding = 1) readonly buffer Acts { float xdata[]; };
layout(std430, binding = 2) writeonly buffer Out { float ydata[]; };

layout(push_constant) uniform Params {
    uint rows;       // output values per token
    uint cols;       // input values per token
    uint n_tok;      // tokens in x and y
    uint row_bytes;  // bytes of one weight row
    uint w_offset;   // byte offset of row 0 in the weight buffer (expert slices)
#ifdef MOE
    uint x_div;      // activation row of pair q: q / x_div (k: shared per token; 1: own)
#endif
} p;

#ifdef MOE
// The expert-grouped variant (built as NAME_moe, docs/vulkan.md#kernels): workgroup z is
// a chunk of moe_group.comp's table, up to NT (token, slot) pairs routed to one expert;
// rows is rows per expert, expert e's matrix starts e * rows rows into the tensor.
// Binding 3 is the IQ2_XXS grid (any buffer for other types).
layout(std430, binding = 4) readonly buffer Perm { uint perm[]; };
layout(std430, binding = 5) readonly buffer Chunks { uint chunks[]; };
uint x_row[NT];
#endif

#include "reduce.glsl"
#ifdef MOE
#include "moe_chunk.glsl"
#endif

uint byte_at(uint off) { return (wdata[off >> 2] >> ((off & 3u) * 8u)) & 0xFFu; }
int sbyte_at(uint off) { return int(byte_at(off) << 24) >> 24; }
// 16-bit fields are 2-byte aligned in every block format used, so never straddle words.
uint u16_at(uint off) { return (wdata[off >> 2] >> ((off & 2u) * 8u)) & 0xFFFFu; }
float f16_at(uint off) { return unpackHalf2x16(u16_at(off)).x; }
#ifdef MOE
float xval(uint t, uint k) { return xdata[x_row[t] * p.cols + k]; }
#else
float xval(uint t, uint k) { return xdata[t * p.cols + k]; }
#endif

void row_partial(uint rb, uint tok0, uint nt, inout float acc[NT]);

#ifdef MOE
void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint c = gl_WorkGroupID.z;
    if (row >= p.rows || c >= chunks[0]) return;  // uniform across the workgroup
    uint e, nt;
    uint pair[NT];
    chunk_pairs(c, e, nt, pair, x_row);
    float acc[NT];
    for (uint t = 0; t < NT; ++t) acc[t] = 0.0;
    row_partial(p.w_offset + (e * p.rows + row) * p.row_bytes, 0u, nt, acc);
    reduce_all(acc);
    if (gl_LocalInvocationID.x < nt) {
        uint t = gl_LocalInvocationID.x;
        ydata[pair[t] * p.rows + row] = acc[t];
    }
}
#else
void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows) return;  // uniform across the workgroup
    uint tok0 = gl_WorkGroupID.z * NT;
    uint nt = min(NT, p.n_tok - tok0);
    float acc[NT];
    for (uint t = 0; t < NT; ++t) acc[t] = 0.0;
    row_partial(p.w_offset + row * p.row_bytes, tok0, nt, acc);
    reduce_all(acc);
    if (gl_LocalInvocationID.x < nt) {
        uint t = gl_LocalInvocationID.x;
        ydata[(tok0 + t) * p.rows + row] = acc[t];
    }
}
#endif
