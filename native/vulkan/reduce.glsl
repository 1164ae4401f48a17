// Workgroup sum of NT partial values per invocation (docs/vulkan.md#kernels).
// With USE_SUBGROUP each subgroup adds its lanes in registers and one lane per subgroup
// writes to shared memory; without it a shared-memory tree does the whole sum. The
// result, for t < NT, is in red_out(t) on every invocation after the call.
#ifndef WG
#define WG 64
#endif
#ifndef NT
#define NT 1
#endif

shared float red[NT * WG];

void reduce_all(inout float acc[NT]) {
    uint lid = gl_LocalInvocationID.x;
#if USE_SUBGROUP
    for (uint t = 0; t < NT; ++t) {
        float s = subgroupAdd(acc[t]);
        if (subgroupElect()) red[t * WG + gl_SubgroupID] = s;
    }
    barrier();
    for (uint t = 0; t < NT; ++t) {
        float total = 0.0;
        for (uint i = 0; i < gl_NumSubgroups; ++i) total += red[t * WG + i];
        acc[t] = total;
    }
#else
    for (uint t = 0; t < NT; ++t) red[t * WG + lid] = acc[t];
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            for (uint t = 0; t < NT; ++t) red[t * WG + lid] += red[t * WG + lid + s];
        }
        barrier();
    }
    for (uint t = 0; t < NT; ++t) acc[t] = red[t * WG];
#endif
    barrier();  // red may be reused by the caller
}
