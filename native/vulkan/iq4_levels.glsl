// IQ4_NL / IQ4_XS levels (docs/reference/formats.md §4.9; native/common/ds4_iq4_values.h):
// the signed value of each 4-bit code.
const int IQ4_KVALUES[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10,
                                    1, 13, 25, 38, 53, 69, 89, 113);

// IQ4_XS: the signed 6-bit scale s_i - 32 of sub-block i of the block at off.
int iq4_xs_scale(uint off, uint i) {
    uint lo = (byte_at(off + 4u + i / 2u) >> (4u * (i & 1u))) & 15u;
    uint hi = (u16_at(off + 2u) >> (2u * i)) & 3u;
    return int(lo | (hi << 4)) - 32;
}
