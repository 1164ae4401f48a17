#version 450
// HC pre (docs/vulkan.md#kernels): from a token's mix projection, the stream weights
// (pre, post, and the Sinkhorn-normalised comb) and the pre-weighted sum of its streams.
// One workgroup per token: invocation 0 forms the split in shared memory in the
// reference's order (f32, every operation rounded on its own: `precise`), then the
// workgroup forms x[d] = sum_h pre[h] * streams[h][d], stream by stream.
// mode 0: a layer's split, mix (n, 2S + S*S) -> split (n, 2S + S*S) = [pre, post, comb].
// mode 1: the output head, mix (n, S) -> split (n, S) = pre only (stable sigmoid).
#define WG 64
#define MAX_HC 8
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Mix { float mix[]; };
layout(std430, binding = 1) readonly buffer Scale { float scale[]; };
layout(std430, binding = 2) readonly buffer Base { float base[]; };
layout(std430, binding = 3) readonly buffer Streams { float streams[]; };
layout(std430, binding = 4) writeonly buffer Split { float split[]; };
layout(std430, binding = 5) writeonly buffer Xout { float xout[]; };

layout(push_constant) uniform Params {
    uint n_tok;
    uint n_hc;
    uint dim;
    uint iters;
    float eps;
    uint mode;
} p;

shared float s_pre[MAX_HC];
shared float s_post[MAX_HC];
shared float s_comb[MAX_HC * MAX_HC];

float sigmoid_plain(float x) {
    precise float d = 1.0 + exp(-x);
    return 1.0 / d;
}

float sigmoid_stable(float x) {
    float e = exp(-abs(x));
    precise float d = 1.0 + e;
    return x >= 0.0 ? 1.0 / d : e / d;
}

// Row softmax + eps, column normalisation, then iters-1 (row, column) rounds; every
// normaliser a reciprocal taken once and multiplied (as the reference does).
void sinkhorn(uint s) {
    for (uint i = 0; i < s; ++i) {
        float mx = s_comb[i * s];
        for (uint j = 1; j < s; ++j) mx = max(mx, s_comb[i * s + j]);
        precise float sum = 0.0;
        for (uint j = 0; j < s; ++j) {
            precise float e = exp(s_comb[i * s + j] - mx);
            s_comb[i * s + j] = e;
            sum += e;
        }
        precise float r = 1.0 / sum;
        for (uint j = 0; j < s; ++j) {
            precise float v = s_comb[i * s + j] * r + p.eps;
            s_comb[i * s + j] = v;
        }
    }
    for (uint it = 0; it < p.iters; ++it) {
        if (it > 0) {
            for (uint i = 0; i < s; ++i) {
                precise float sum = 0.0;
                for (uint j = 0; j < s; ++j) sum += s_comb[i * s + j];
                precise float r = 1.0 / (sum + p.eps);
                for (uint j = 0; j < s; ++j) {
                    precise float v = s_comb[i * s + j] * r;
                    s_comb[i * s + j] = v;
                }
            }
        }
        for (uint j = 0; j < s; ++j) {
            precise float sum = 0.0;
            for (uint i = 0; i < s; ++i) sum += s_comb[i * s + j];
            precise float r = 1.0 / (sum + p.eps);
            for (uint i = 0; i < s; ++i) {
                precise float v = s_comb[i * s + j] * r;
                s_comb[i * s + j] = v;
            }
        }
    }
}

void main() {
    uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (t >= p.n_tok) return;
    uint s = p.n_hc;
    uint m = p.mode == 0u ? 2u * s + s * s : s;
    uint mb = t * m;
    if (gl_LocalInvocationID.x == 0u) {
        for (uint h = 0; h < s; ++h) {
            precise float z = mix[mb + h] * scale[0] + base[h];
            if (p.mode == 0u) {
                precise float pre = sigmoid_plain(z) + p.eps;
                s_pre[h] = pre;
                precise float zp = mix[mb + s + h] * scale[1] + base[s + h];
                precise float post = 2.0 * sigmoid_plain(zp);
                s_post[h] = post;
            } else {
                precise float pre = sigmoid_stable(z) + p.eps;
                s_pre[h] = pre;
            }
        }
        if (p.mode == 0u) {
            for (uint i = 0; i < s * s; ++i) {
                precise float z = mix[mb + 2u * s + i] * scale[2] + base[2u * s + i];
                s_comb[i] = z;
            }
            sinkhorn(s);
        }
        for (uint h = 0; h < s; ++h) split[mb + h] = s_pre[h];
        if (p.mode == 0u) {
            for (uint h = 0; h < s; ++h) split[mb + s + h] = s_post[h];
            for (uint i = 0; i < s * s; ++i) split[mb + 2u * s + i] = s_comb[i];
        }
    }
    barrier();
    uint sb = t * s * p.dim;
    for (uint d = gl_LocalInvocationID.x; d < p.dim; d += WG) {
        precise float acc = 0.0;
        for (uint h = 0; h < s; ++h) acc = acc + s_pre[h] * streams[sb + h * p.dim + d];
        xout[t * p.dim + d] = acc;
    }
}
