// Fields of the grid i-quants (docs/reference/formats.md §4.11-§4.13), after the frame's
// byte_at / u16_at. `grid` (declared by the including shader) holds the codebook packed
// one byte per position: IQ2_XS entry k in words 2k, 2k + 1; IQ3_XXS and IQ3_S entry k in
// word k. Each function gives value j of a run: its unsigned grid value, and its sign.

// IQ2_XS, value v (0..255) of the block at off: (grid value, negative?); m = 2s + 1 of
// its 16-value half-run.
uint iq2xs_value(uint off, uint v, out bool neg) {
    uint q = u16_at(off + 2u + 2u * (v / 8u));
    uint sidx = q >> 9;
    uint signs = sidx | ((bitCount(sidx) & 1u) << 7);
    neg = ((signs >> (v % 8u)) & 1u) != 0u;
    uint word = grid[2u * (q & 511u) + (v % 8u) / 4u];
    return (word >> (8u * (v % 4u))) & 255u;
}
int iq2xs_mult(uint off, uint v) {
    return int(2u * ((byte_at(off + 66u + v / 32u) >> (4u * ((v / 16u) & 1u))) & 15u) + 1u);
}

uint iq3xxs_value(uint off, uint v, out bool neg) {
    uint r = v / 32u;
    uint aux = u16_at(off + 66u + 4u * r) | (u16_at(off + 68u + 4u * r) << 16);
    uint sidx = (aux >> (7u * ((v % 32u) / 8u))) & 127u;
    uint signs = sidx | ((bitCount(sidx) & 1u) << 7);
    neg = ((signs >> (v % 8u)) & 1u) != 0u;
    return (grid[byte_at(off + 2u + v / 4u)] >> (8u * (v % 4u))) & 255u;
}
int iq3xxs_mult(uint off, uint v) {
    uint r = v / 32u;
    return int(2u * (u16_at(off + 68u + 4u * r) >> 12) + 1u);
}

uint iq3s_value(uint off, uint v, out bool neg) {
    uint idx = v / 4u;
    uint gi = byte_at(off + 2u + idx) | (((byte_at(off + 66u + idx / 8u) >> (idx % 8u)) & 1u) << 8);
    neg = ((byte_at(off + 74u + v / 8u) >> (v % 8u)) & 1u) != 0u;
    return (grid[gi] >> (8u * (v % 4u))) & 255u;
}
int iq3s_mult(uint off, uint v) {
    return int(2u * ((byte_at(off + 106u + v / 64u) >> (4u * ((v / 32u) & 1u))) & 15u) + 1u);
}
