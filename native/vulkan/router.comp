#version 450
// MoE router (docs/vulkan.md#kernels): per token, scores sqrt(softplus(logit)), then
// either the k best of score + bias (biased top-k; ties to the lower expert id, as a
// stable sort of the negated scores gives) or the token's row of the tid2eid table
// (hash layers); weights are the chosen unbiased scores, renormalised (sum floored at
// 2^-14) and scaled. One workgroup per token; the selection is an arg-max over the
// workgroup repeated k times.
#define WG 64
#define MAX_EXPERT 1024
#define MAX_K 32
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) readonly buffer Tokens { int tokens[]; };
layout(std430, binding = 3) readonly buffer Table { int tid2eid[]; };
layout(std430, binding = 4) writeonly buffer Ids { int ids[]; };
layout(std430, binding = 5) writeonly buffer Wts { float wts[]; };

layout(push_constant) uniform Params {
    uint n_tok;
    uint n_expert;
    uint k;
    uint mode;  // 0: top-k of the scores, 1: top-k of scores + bias, 2: hash table
    float scale;
    uint normalize;
    uint n_vocab;  // rows of tid2eid (a token id past it reads the last row: memory
                   // safety only, the engine checks token ids before they get here)
} p;

shared float prob[MAX_EXPERT];
shared float sel[MAX_EXPERT];
shared uint taken[MAX_EXPERT];
shared float best_v[WG];
shared uint best_i[WG];
shared int chosen[MAX_K];

// log1p(e) for e in [0, 1] as 2 atanh(e / (2 + e)): an odd series in z <= 1/3 that
// needs no log near 1 (where the device's log has only absolute accuracy).
float log1p_small(float e) {
    float z = e / (2.0 + e);
    float z2 = z * z;
    float term = z;
    float sum = 0.0;
    for (int n = 1; n <= 23; n += 2) {
        sum += term / float(n);
        term *= z2;
    }
    return 2.0 * sum;
}

float softplus(float x) {
    if (x > 20.0) return x;
    if (x < -20.0) return exp(x);
    return max(x, 0.0) + log1p_small(exp(-abs(x)));
}

// (v, i) beats (w, j): larger value, or equal value and lower id.
bool beats(float v, uint i, float w, uint j) { return v > w || (v == w && i < j); }

void main() {
    uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (t >= p.n_tok) return;
    uint lid = gl_LocalInvocationID.x;
    uint lb = t * p.n_expert;
    for (uint e = lid; e < p.n_expert; e += WG) {
        float pr = sqrt(softplus(logits[lb + e]));
        prob[e] = pr;
        precise float s = pr + (p.mode == 1u ? bias[e] : 0.0);
        sel[e] = s;
        taken[e] = 0u;
    }
    barrier();
    if (p.mode == 2u) {
        uint tok = min(uint(tokens[t]), p.n_vocab - 1u);
        if (lid < p.k) chosen[lid] = tid2eid[tok * p.k + lid];
    } else {
        for (uint r = 0; r < p.k; ++r) {
            float bv = 0.0;
            uint bi = 0xFFFFFFFFu;
            for (uint e = lid; e < p.n_expert; e += WG) {
                if (taken[e] == 0u && (bi == 0xFFFFFFFFu || beats(sel[e], e, bv, bi))) {
                    bv = sel[e];
                    bi = e;
                }
            }
            best_v[lid] = bv;
            best_i[lid] = bi;
            barrier();
            for (uint s = WG / 2; s > 0; s >>= 1) {
                if (lid < s) {
                    uint j = best_i[lid + s];
                    if (j != 0xFFFFFFFFu && (best_i[lid] == 0xFFFFFFFFu
                                             || beats(best_v[lid + s], j, best_v[lid],
                                                      best_i[lid]))) {
                        best_v[lid] = best_v[lid + s];
                        best_i[lid] = j;
                    }
                }
                barrier();
            }
            if (lid == 0u) {
                chosen[r] = int(best_i[0]);
                taken[best_i[0]] = 1u;
            }
            barrier();
        }
    }
    barrier();
    if (lid == 0u) {
        // The reference's f32 sum of k values: in order below 8; from 8 on, numpy's
        // eight interleaved partial sums, paired, then the tail in order.
        precise float total = 0.0;
        uint r0 = 0u;
        if (p.k >= 8u) {
            precise float part[8];
            for (uint j = 0; j < 8u; ++j) part[j] = prob[chosen[j]];
            r0 = p.k - p.k % 8u;
            for (uint i = 8u; i < r0; i += 8u) {
                for (uint j = 0; j < 8u; ++j) part[j] = part[j] + prob[chosen[i + j]];
            }
            total = ((part[0] + part[1]) + (part[2] + part[3]))
                    + ((part[4] + part[5]) + (part[6] + part[7]));
        }
        for (uint r = r0; r < p.k; ++r) total += prob[chosen[r]];
        total = max(total, 6.103515625e-05);
        for (uint r = 0; r < p.k; ++r) {
            precise float w = prob[chosen[r]];
            if (p.normalize != 0u) w = w / total;
            precise float ws = w * p.scale;
            ids[t * p.k + r] = chosen[r];
            wts[t * p.k + r] = ws;
        }
    }
}
