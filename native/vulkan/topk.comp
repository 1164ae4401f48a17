#version 450
// Top-k of the indexer scores per query (docs/vulkan.md#kernels): the indices of the k
// largest of scores[t][0 .. n) with n = (pos0 + t + 1) / ratio, lower index first among
// equal scores, written in ascending order (0 .. n-1 when n <= k). One workgroup per
// query. Radix select: scores become order-preserving 32-bit keys (-0 taken as +0), four
// 8-bit histogram passes find the k-th largest key T and how many keys equal to T are
// still wanted; an ordered compaction (workgroup prefix sums, chunk by chunk) then
// writes every index with key > T and the first wanted ones with key == T. Any n, any
// k; NaN scores are not ordered.
#define WG 256
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Scores { float scores[]; };  // (n_q, stride)
layout(std430, binding = 1) writeonly buffer Sel { uint sel[]; };        // (n_q, k)

layout(push_constant) uniform Params {
    uint n_q;
    uint k;
    uint pos0;
    uint ratio;
    uint stride;
} p;

shared uint hist[WG];
shared uint scan_gt[WG];
shared uint scan_eq[WG];
shared uint sh_prefix, sh_mask, sh_want;

uint key_of(float s) {
    uint u = floatBitsToUint(s == 0.0 ? 0.0 : s);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// Inclusive prefix sums of scan_gt and scan_eq over the workgroup (Hillis-Steele).
void scan2() {
    uint lid = gl_LocalInvocationID.x;
    for (uint off = 1u; off < WG; off <<= 1) {
        uint a = lid >= off ? scan_gt[lid - off] : 0u;
        uint b = lid >= off ? scan_eq[lid - off] : 0u;
        barrier();
        scan_gt[lid] += a;
        scan_eq[lid] += b;
        barrier();
    }
}

void main() {
    uint t = gl_WorkGroupID.x;
    uint lid = gl_LocalInvocationID.x;
    uint n = (p.pos0 + t + 1u) / p.ratio;
    uint base = t * p.stride;
    uint obase = t * p.k;
    if (n <= p.k) {
        for (uint i = lid; i < n; i += WG) sel[obase + i] = i;
        return;
    }
    if (lid == 0u) { sh_prefix = 0u; sh_mask = 0u; sh_want = p.k; }
    for (int shift = 24; shift >= 0; shift -= 8) {
        hist[lid] = 0u;
        barrier();
        uint prefix = sh_prefix, mask = sh_mask;
        for (uint i = lid; i < n; i += WG) {
            uint key = key_of(scores[base + i]);
            if ((key & mask) == prefix) atomicAdd(hist[(key >> uint(shift)) & 0xFFu], 1u);
        }
        barrier();
        if (lid == 0u) {
            uint above = 0u, b = 255u;
            while (above + hist[b] < sh_want) { above += hist[b]; b -= 1u; }
            sh_want -= above;
            sh_prefix |= b << uint(shift);
            sh_mask |= 0xFFu << uint(shift);
        }
        barrier();
    }
    uint thr = sh_prefix, want = sh_want;  // the k-th largest key; equal keys still wanted
    uint out_at = 0u, eq_seen = 0u;
    for (uint chunk = 0u; chunk < n; chunk += WG) {
        uint i = chunk + lid;
        uint key = i < n ? key_of(scores[base + i]) : 0u;
        bool gt = i < n && key > thr;
        bool eq = i < n && key == thr;
        scan_eq[lid] = eq ? 1u : 0u;
        scan_gt[lid] = 0u;
        barrier();
        scan2();
        bool take = gt || (eq && eq_seen + scan_eq[lid] <= want);
        uint eq_total = scan_eq[WG - 1u];
        barrier();
        scan_gt[lid] = take ? 1u : 0u;
        scan_eq[lid] = 0u;
        barrier();
        scan2();
        if (take) sel[obase + out_at + scan_gt[lid] - 1u] = i;
        out_at += scan_gt[WG - 1u];
        eq_seen += eq_total;
        barrier();
    }
}
