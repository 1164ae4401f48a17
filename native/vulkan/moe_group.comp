#version 450
// Grouping of (token, slot) pairs by expert (docs/vulkan.md#kernels): from the router's
// ids (n_pairs), perm lists the pairs expert by expert and chunks = [n_chunks,
// (expert, first, count) * n_chunks] cuts each expert's run into pieces of at most NT
// pairs, the unit of work of the matvec _moe kernels. Counting and the scatter are
// spread over the workgroup (shared-memory atomics), so the order of the pairs within an
// expert's run is unspecified: every pair's product is formed alone, whatever chunk it
// shares, so the results do not depend on it. The prefix sum over the experts and the
// chunk table are serial (at most MAX_EXPERT steps, and one per chunk).
#define WG 256
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
    if (lid == 0u) {
        uint pos = 0u;
        uint nc = 0u;
        for (uint e = 0; e < p.n_expert; ++e) {
            uint c = counts[e];
            counts[e] = pos;  // from here on: the next free slot of expert e's run
            for (uint s = 0; s < c; s += p.nt) {
                chunks[1u + 3u * nc] = e;
                chunks[2u + 3u * nc] = pos + s;
                chunks[3u + 3u * nc] = min(p.nt, c - s);
                nc += 1u;
            }
            pos += c;
        }
        chunks[0] = nc;
    }
    barrier();
    for (uint i = lid; i < p.n_pairs; i += WG) perm[atomicAdd(counts[uint(ids[i])], 1u)] = i;
}
