#version 450
// Grouping of (token, slot) pairs by expert (docs/vulkan.md#kernels): from the router's
// ids (n_pairs), perm lists the pairs expert by expert (in pair order within an expert)
// and chunks = [n_chunks, (expert, first, count) * n_chunks] cuts each expert's run into
// pieces of at most NT pairs, the unit of work of the matvec _moe kernels. The counting
// is spread over the workgroup; the prefix sum and the stable scatter are serial (one
// invocation: a few thousand steps at prefill sizes).
#define WG 64
#define MAX_EXPERT 1024
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Ids { int ids[]; };
layout(std430, binding = 1) writeonly buffer Perm { uint perm[]; };
layout(std430, binding = 2) writeonly buffer Chunks { uint chunks[]; };

layout(push_constant) uniform Params {
    uint n_pairs;
    uint n_expert;
    uint nt;
} p;

shared uint counts[MAX_EXPERT];

void main() {
    uint lid = gl_LocalInvocationID.x;
    for (uint e = lid; e < p.n_expert; e += WG) counts[e] = 0u;
    barrier();
    for (uint i = lid; i < p.n_pairs; i += WG) atomicAdd(counts[uint(ids[i])], 1u);
    barrier();
    if (lid != 0u) return;
    uint pos = 0u;
    uint nc = 0u;
    for (uint e = 0; e < p.n_expert; ++e) {
        uint c = counts[e];
        counts[e] = pos;
        for (uint s = 0; s < c; s += p.nt) {
            chunks[1u + 3u * nc] = e;
            chunks[2u + 3u * nc] = pos + s;
            chunks[3u + 3u * nc] = min(p.nt, c - s);
            nc += 1u;
        }
        pos += c;
    }
    chunks[0] = nc;
    for (uint i = 0; i < p.n_pairs; ++i) {
        uint e = uint(ids[i]);
        perm[counts[e]] = i;
        counts[e] += 1u;
    }
}
