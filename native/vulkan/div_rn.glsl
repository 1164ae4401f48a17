// a / b rounded to nearest, ties to even, as IEEE-754 f32 division rounds
// (docs/vulkan.md#kernels). Vulkan lets OpFDiv be off by 2.5 ulp, so a scale that must
// equal the host's bit for bit is divided here in integers: both significands are made
// 24-bit, 25 quotient bits are formed by long division (24 significant and a round bit),
// the remainder is the sticky bit, and the result is rounded once (subnormal results
// included: they drop more bits before the one rounding).
float div_rn(float a, float b) {
    uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    uint sign = (ua ^ ub) & 0x80000000u;
    uint ea = (ua >> 23) & 0xFFu, eb = (ub >> 23) & 0xFFu;
    uint ma = ua & 0x7FFFFFu, mb = ub & 0x7FFFFFu;
    if (ea == 255u || eb == 255u) {
        if ((ea == 255u && ma != 0u) || (eb == 255u && mb != 0u) || (ea == 255u && eb == 255u))
            return uintBitsToFloat(0x7FC00000u);  // NaN
        return uintBitsToFloat(ea == 255u ? (sign | 0x7F800000u) : sign);  // inf/b, a/inf
    }
    if ((ub & 0x7FFFFFFFu) == 0u)
        return uintBitsToFloat((ua & 0x7FFFFFFFu) == 0u ? 0x7FC00000u : (sign | 0x7F800000u));
    if ((ua & 0x7FFFFFFFu) == 0u) return uintBitsToFloat(sign);
    int e_a = int(ea), e_b = int(eb);
    if (ea == 0u) {
        e_a = 1;
        while (ma < 0x800000u) { ma <<= 1; e_a -= 1; }
    } else {
        ma |= 0x800000u;
    }
    if (eb == 0u) {
        e_b = 1;
        while (mb < 0x800000u) { mb <<= 1; e_b -= 1; }
    } else {
        mb |= 0x800000u;
    }
    int e = e_a - e_b + 127;  // biased exponent of a quotient in [1, 2)
    if (ma < mb) { ma <<= 1; e -= 1; }
    uint q = 0u, rem = ma;
    for (int i = 0; i < 25; ++i) {
        q <<= 1;
        if (rem >= mb) { rem -= mb; q |= 1u; }
        rem <<= 1;
    }
    // q in [2^24, 2^25): the value is q * 2^(e - 151). Normal results keep 24 bits;
    // subnormal ones (e <= 0) are multiples of 2^-149, so they keep 25 - (2 - e) bits.
    uint drop = e >= 1 ? 1u : uint(2 - e);
    if (drop > 25u) return uintBitsToFloat(sign);
    uint m = q >> drop;
    uint rbit = (q >> (drop - 1u)) & 1u;
    bool sticky = rem != 0u || (q & ((1u << (drop - 1u)) - 1u)) != 0u;
    if (rbit == 1u && (sticky || (m & 1u) == 1u)) m += 1u;
    if (e >= 1) {
        if (m == 0x1000000u) { m = 0x800000u; e += 1; }
        if (e >= 255) return uintBitsToFloat(sign | 0x7F800000u);
        return uintBitsToFloat(sign | (uint(e) << 23) | (m & 0x7FFFFFu));
    }
    return uintBitsToFloat(sign | m);  // m == 2^23 is the smallest normal, as it should be
}

// The signed int8 code of v: round half to even, then saturate (numpy rint, then clip).
int code_of(float v) { return int(clamp(roundEven(v), -128.0, 127.0)); }
uint pack4(int c0, int c1, int c2, int c3) {
    return (uint(c0) & 0xFFu) | ((uint(c1) & 0xFFu) << 8) | ((uint(c2) & 0xFFu) << 16)
        | ((uint(c3) & 0xFFu) << 24);
}
