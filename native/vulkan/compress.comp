#version 450
#extension GL_GOOGLE_include_directive : require
// Compressor emission (docs/vulkan.md#kernels, docs/reference/model.md §3.4): pools the
// per-token kv rows over a finished window with softmax weights of score = gate + ape,
// per output dim; then RMSNorm with the learned weight and RoPE at the window's first
// position. Ratio 4 pools eight candidates: lane [0, d) of the previous window's four
// tokens (absent before position 4) and lane [d, 2d) of the current window's four.
// One workgroup per emitted row; each invocation owns pairs of dims (the RoPE pairs),
// so it reads back only what it wrote itself.
#include "subgroup.glsl"
#define WG 64
#define NT 1
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Kv { float kv[]; };       // (tokens, c*d)
layout(std430, binding = 1) readonly buffer Gate { float gate[]; };   // (tokens, c*d)
layout(std430, binding = 2) readonly buffer Ape { float ape[]; };     // (ratio, c*d)
layout(std430, binding = 3) readonly buffer Norm { float normw[]; };  // (d)
layout(std430, binding = 4) readonly buffer Cos { float cosv[]; };    // (table rows, n_rot/2)
layout(std430, binding = 5) readonly buffer Sin { float sinv[]; };
layout(std430, binding = 6) buffer Out { float rows[]; };             // (rows, d)

layout(push_constant) uniform Params {
    uint d;
    uint ratio;
    uint n_rot;
    float eps;
    uint last_row;     // kv/gate row of the first emission's last token
    uint first_pos;    // absolute position of the first emission's window start
    uint rope_row;     // cos/sin row of the first emission
    uint rope_stride;  // cos/sin rows between emissions
    uint out_row;      // output row of the first emission
    uint in_ring;      // 0: kv/gate row r is row r; else row r % in_ring (a ring buffer)
} p;

#include "reduce.glsl"

const float EMPTY = -5e29;  // pooled rows whose best score is at most this are zero

uint at_row(uint r) { return p.in_ring == 0u ? r : r % p.in_ring; }

float pool_dim(uint start, bool has_prev, uint j) {
    uint width = p.ratio == 4u ? 2u * p.d : p.d;
    float mx = -3.402823466e38;
    if (p.ratio == 4u) {
        for (uint i = 0u; i < 4u; ++i) {
            if (has_prev) mx = max(mx, gate[at_row(start - 4u + i) * width + j] + ape[i * width + j]);
            mx = max(mx, gate[at_row(start + i) * width + p.d + j] + ape[i * width + p.d + j]);
        }
    } else {
        for (uint i = 0u; i < p.ratio; ++i) mx = max(mx, gate[at_row(start + i) * width + j] + ape[i * width + j]);
    }
    if (mx <= EMPTY) return 0.0;
    float den = 0.0, num = 0.0;
    if (p.ratio == 4u) {
        for (uint i = 0u; i < 4u; ++i) {
            if (has_prev) {
                uint at = at_row(start - 4u + i) * width + j;
                float w = exp((gate[at] + ape[i * width + j]) - mx);
                den += w;
                num += w * kv[at];
            }
            uint at = at_row(start + i) * width + p.d + j;
            float w = exp((gate[at] + ape[i * width + p.d + j]) - mx);
            den += w;
            num += w * kv[at];
        }
    } else {
        for (uint i = 0u; i < p.ratio; ++i) {
            uint at = at_row(start + i) * width + j;
            float w = exp((gate[at] + ape[i * width + j]) - mx);
            den += w;
            num += w * kv[at];
        }
    }
    return num / den;
}

void main() {
    uint e = gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    uint start = p.last_row + e * p.ratio + 1u - p.ratio;
    bool has_prev = p.first_pos + e * p.ratio >= 4u;
    uint obase = (p.out_row + e) * p.d;
    float acc[NT];
    acc[0] = 0.0;
    for (uint k = lid; k < p.d / 2u; k += WG) {
        float a = pool_dim(start, has_prev, 2u * k), b = pool_dim(start, has_prev, 2u * k + 1u);
        rows[obase + 2u * k] = a;
        rows[obase + 2u * k + 1u] = b;
        acc[0] += a * a + b * b;
    }
    reduce_all(acc);
    precise float mean = acc[0] / float(p.d);
    precise float scale = 1.0 / sqrt(mean + p.eps);
    uint half_rot = p.n_rot / 2u;
    uint tail = p.d - p.n_rot;
    uint trow = (p.rope_row + e * p.rope_stride) * half_rot;
    for (uint k = lid; k < p.d / 2u; k += WG) {
        precise float x0 = rows[obase + 2u * k] * scale;
        precise float x1 = rows[obase + 2u * k + 1u] * scale;
        x0 = x0 * normw[2u * k];
        x1 = x1 * normw[2u * k + 1u];
        if (2u * k >= tail) {
            uint r = trow + (2u * k - tail) / 2u;
            float c = cosv[r], s = sinv[r];
            precise float y0 = x0 * c - x1 * s;
            precise float y1 = x0 * s + x1 * c;
            x0 = y0;
            x1 = y1;
        }
        rows[obase + 2u * k] = x0;
        rows[obase + 2u * k + 1u] = x1;
    }
}
