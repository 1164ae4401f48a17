/* IEEE half <-> single conversions shared by every quantizer in this module. */
#include "qz_internal.h"

/* f32 -> f16, round to nearest even, subnormals kept, overflow -> inf,
 * NaN -> sign | 0x7e00 (docs/reference/formats.md §4.2). */
uint16_t qz_f32_to_f16(float f) {
    uint32_t x = qz_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;
    if (ax >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                        /* below 2^-14: subnormal half */
        if (ax <= 0x33000000u) return sign;         /* <= 2^-25 rounds to zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24: value in units of 2^-24 is m >> shift */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float qz_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return qz_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 is exact in f32 */
        float v = (float)man * qz_from_bits(0x33800000u);
        return sign ? -v : v;
    }
    return qz_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}
