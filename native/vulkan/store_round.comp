#version 450
#extension GL_GOOGLE_include_directive : require
// The ds4 numerics' rounding of cached rows, in place, bit for bit as the engine's
// lowprec / scalar_ops functions (docs/vulkan.md#kernels, docs/reference/model.md §2.5):
//   mode 0 (KV rows): FP8 E4M3 round trip of dims [0, n_nope) in blocks of 64, then f16;
//   mode 1 (indexer rows): 128-point Hadamard, FP4 E2M1 round trip in blocks of 32, f16;
//   mode 2 (indexer queries): Hadamard and FP4, no f16.
// Every step is exact in f32 except the Hadamard's adds (correctly rounded, `precise`,
// in the reference's butterfly order) and amax / top (div_rn). The block scale
// 2^ceil(log2(amax / top)) takes log2 as a correctly rounded f32 log2 gives it. One
// workgroup per row.
#define WG 128
#define MAXD 512
layout(local_size_x = WG) in;

layout(std430, binding = 0) buffer Rows { float rows[]; };

layout(push_constant) uniform Params {
    uint n_rows;
    uint dim;     // row width (<= 512; a multiple of 128 for modes 1 and 2)
    uint row0;    // first row to round
    uint mode;
    uint n_nope;  // mode 0: dims [0, n_nope) take FP8 (a multiple of 64)
} p;

#include "div_rn.glsl"

shared float v[MAXD];

// ceil(log2(r)) with log2 rounded to f32 first, r a positive normal float: exact at
// powers of two; just above one, k + log2(1 + m) may round back to k.
int ceil_log2f(float r) {
    uint u = floatBitsToUint(r);
    int k = int((u >> 23) & 0xFFu) - 127;
    uint mbits = u & 0x7FFFFFu;
    if (mbits == 0u) return k;
    if (k == 0) return 1;
    float m = float(mbits) * (1.0 / 8388608.0);
    precise float delta = m * 1.4426950408889634 * (1.0 - 0.5 * m);  // log2(1 + m), m small
    precise float sum = float(k) + delta;
    return int(ceil(sum));
}

// Nearest value of a small float format (mant_bits, smallest normal exponent min_exp),
// ties to even, saturating at top; sign kept (lowprec._round_minifloat).
float round_minifloat(float u, int mant_bits, int min_exp, float top) {
    float mag = abs(u);
    int ex;
    frexp(mag, ex);  // mag = f * 2^ex, f in [0.5, 1)
    int e = max(ex - 1, min_exp);
    float q = roundEven(ldexp(mag, mant_bits - e));
    float r = min(ldexp(q, e - mant_bits), top);
    return uintBitsToFloat((floatBitsToUint(u) & 0x80000000u) | floatBitsToUint(r));
}

// f32 -> binary16 (nearest even, overflow to inf) -> f32.
float f16round(float x) {
    float mag = abs(x);
    float r = mag >= 65520.0 ? uintBitsToFloat(0x7F800000u) : round_minifloat(mag, 10, -14, 65504.0);
    return uintBitsToFloat((floatBitsToUint(x) & 0x80000000u) | floatBitsToUint(r));
}

float block_round(uint d, uint block, float top, float floor_amax, bool e4m3) {
    uint b0 = (d / block) * block;
    float amax = 0.0;
    for (uint i = 0u; i < block; ++i) amax = max(amax, abs(v[b0 + i]));
    amax = max(amax, floor_amax);
    int ex = ceil_log2f(div_rn(amax, top));
    float u = ldexp(v[d], -ex);
    float r = e4m3 ? round_minifloat(u, 3, -6, 448.0) : round_minifloat(u, 1, 0, 6.0);
    return ldexp(r, ex);
}

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.n_rows) return;  // uniform per workgroup
    uint lid = gl_LocalInvocationID.x;
    uint base = (p.row0 + row) * p.dim;
    for (uint d = lid; d < p.dim; d += WG) v[d] = rows[base + d];
    barrier();
    if (p.mode != 0u) {
        for (uint h = 1u; h < 128u; h <<= 1) {
            for (uint pi = lid; pi < p.dim / 2u; pi += WG) {
                uint j = pi % 64u;
                uint ia = (pi / 64u) * 128u + (j / h) * 2u * h + j % h;
                precise float a = v[ia], b = v[ia + h];
                precise float s = a + b, t = a - b;
                v[ia] = s;
                v[ia + h] = t;
            }
            barrier();
        }
        for (uint d = lid; d < p.dim; d += WG) {
            precise float s = v[d] * 0.08838834764831845;
            v[d] = s;
        }
        barrier();
    }
    float outv[MAXD / WG];
    for (uint i = 0u; i < MAXD / WG; ++i) {
        uint d = lid + i * WG;
        if (d >= p.dim) break;
        float x = v[d];
        if (p.mode == 0u) {
            if (d < p.n_nope) x = block_round(d, 64u, 448.0, 1e-4, true);
        } else {
            x = block_round(d, 32u, 6.0, 7.052966104933725e-38, false);
        }
        outv[i] = p.mode == 2u ? x : f16round(x);
    }
    for (uint i = 0u; i < MAXD / WG; ++i) {
        uint d = lid + i * WG;
        if (d >= p.dim) break;
        rows[base + d] = outv[i];
    }
}
