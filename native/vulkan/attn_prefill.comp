#version 450
// Attention with sinks for a chunk of query tokens (docs/vulkan.md#kernels,
// docs/reference/model.md §3.6). Query t sits at position p = pos0 + t and sees, K = V:
// its raw window, positions max(p + 1 - n_swa, floor) .. p (raw row of position x at
// x - raw_base, modulo raw_ring when the raw rows are a ring), then the compressed rows emitted by then, n = (p + 1) / ratio of them
// (none when ratio is 0): all of them, or, when top_k > 0 and n > top_k, the top_k rows
// listed in sel[t]. Head h's sink logit joins the softmax denominator unscaled.
// One workgroup per (head, query); rows go in chunks of WG, one row's dot per
// invocation, with an online softmax (running max, rescaled sums) so no score storage
// is needed; each invocation owns the output dims lid, lid + WG, ...
#define WG 64
#define MAXJ 8  // head dims up to WG * MAXJ = 512
layout(local_size_x = WG) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };          // (n_q, H, dim)
layout(std430, binding = 1) readonly buffer Raw { float raw[]; };      // (raw rows, dim)
layout(std430, binding = 2) readonly buffer Comp { float comp[]; };    // (comp rows, dim)
layout(std430, binding = 3) readonly buffer Sel { uint sel[]; };       // (n_q, top_k)
layout(std430, binding = 4) readonly buffer Sinks { float sinks[]; };  // (H)
layout(std430, binding = 5) writeonly buffer Out { float outv[]; };    // (n_q, H, dim)

layout(push_constant) uniform Params {
    uint n_q;
    uint n_head;
    uint dim;
    float scale;
    uint pos0;
    uint n_swa;
    uint raw_base;
    uint floor_pos;  // no raw row before this position (kept rows only)
    uint ratio;      // 0: no compressed rows
    uint top_k;      // 0: every visible compressed row
    uint raw_ring;   // 0: raw rows in order; else row (x - raw_base) % raw_ring (a ring)
} p;

shared float qs[WG * MAXJ];
shared float red[WG];
shared float wts[WG];
shared uint at_row[WG];  // element offset of the chunk's row i; top bit: compressed

float tree(float v, bool take_max) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] = take_max ? max(red[lid], red[lid + s]) : red[lid] + red[lid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    uint h = gl_WorkGroupID.x;
    uint t = gl_WorkGroupID.y;
    uint lid = gl_LocalInvocationID.x;
    uint pos = p.pos0 + t;
    uint first = pos + 1u > p.n_swa ? pos + 1u - p.n_swa : 0u;
    first = max(first, p.floor_pos);
    uint n_raw = pos + 1u - first;
    uint n_visible = p.ratio == 0u ? 0u : (pos + 1u) / p.ratio;
    bool listed = p.top_k > 0u && n_visible > p.top_k;
    uint n_comp = listed ? p.top_k : n_visible;
    uint n_rows = n_raw + n_comp;
    uint qb = (t * p.n_head + h) * p.dim;
    for (uint d = lid; d < p.dim; d += WG) qs[d] = q[qb + d];
    barrier();

    float sink = sinks[h];
    float mx = sink, den = 0.0;
    float acc[MAXJ];
    for (uint j = 0u; j < MAXJ; ++j) acc[j] = 0.0;
    for (uint chunk = 0u; chunk < n_rows; chunk += WG) {
        uint i = chunk + lid;
        float s = -3.402823466e38;
        if (i < n_rows) {
            uint off;
            bool is_comp = i >= n_raw;
            if (!is_comp) {
                uint r = first + i - p.raw_base;
                off = (p.raw_ring == 0u ? r : r % p.raw_ring) * p.dim;
            } else {
                uint c = i - n_raw;
                off = (listed ? sel[t * p.top_k + c] : c) * p.dim;
            }
            float dot = 0.0;
            if (is_comp) {
                for (uint d = 0u; d < p.dim; ++d) dot += qs[d] * comp[off + d];
            } else {
                for (uint d = 0u; d < p.dim; ++d) dot += qs[d] * raw[off + d];
            }
            s = dot * p.scale;
            at_row[lid] = is_comp ? (off | 0x80000000u) : off;
        }
        float m_new = max(mx, tree(s, true));
        float alpha = exp(mx - m_new);
        float w = i < n_rows ? exp(s - m_new) : 0.0;
        wts[lid] = w;
        den = den * alpha + tree(w, false);  // tree's barriers publish wts and at_row
        mx = m_new;
        uint n_here = min(uint(WG), n_rows - chunk);
        for (uint j = 0u; j < MAXJ; ++j) {
            uint d = lid + j * WG;
            if (d >= p.dim) break;
            float a = acc[j] * alpha;
            for (uint r = 0u; r < n_here; ++r) {
                uint o = at_row[r];
                float v = (o & 0x80000000u) != 0u ? comp[(o & 0x7FFFFFFFu) + d] : raw[o + d];
                a += wts[r] * v;
            }
            acc[j] = a;
        }
        barrier();  // wts and at_row are rewritten by the next chunk
    }
    float inv = 1.0 / (den + exp(sink - mx));
    for (uint j = 0u; j < MAXJ; ++j) {
        uint d = lid + j * WG;
        if (d < p.dim) outv[qb + d] = acc[j] * inv;
    }
}
