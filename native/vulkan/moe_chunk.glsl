// One chunk of the expert-grouped (token, slot) pairs that moe_group.comp writes
// (docs/vulkan.md#kernels): chunks[0] = the number of chunks, then per chunk (expert,
// first index into perm, pair count <= NT). Pairs past the count repeat the last one,
// so every invocation reads valid rows; only the first `nt` results are stored.
// Needs NT, the Perm/Chunks buffers and p.x_div declared before it is included.
void chunk_pairs(uint c, out uint e, out uint nt, out uint pair[NT], out uint xr[NT]) {
    e = chunks[1u + 3u * c];
    uint first = chunks[2u + 3u * c];
    nt = chunks[3u + 3u * c];
    for (uint t = 0; t < NT; ++t) {
        pair[t] = perm[first + min(t, nt - 1u)];
        xr[t] = pair[t] / p.x_div;  // the activation row this pair reads
    }
}
