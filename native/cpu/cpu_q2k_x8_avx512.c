/* AVX-512 VNNI kernel over Q2_K rows interleaved by 8 (cpu_q2k_x8.c, ADR 0067).
 *
 * A repacked block of 8 rows is processed as 8 pairs of sub-blocks. In every vector of a
 * pair, int32 lane j belongs to row j % 8 and sub-block 2p + j / 8, so one int8 dot
 * (vpdpbusd) advances 8 rows at once and its lanes never need a horizontal sum: step f
 * (0..3) of pair p takes bits 2f..2f+1 of the pair's 64 code bytes (one GF(2) affine
 * byte map) against the activation values 4f..4f+3 of each lane's sub-block. After the
 * four steps a lane holds one row's sub-block sum (|sum| <= 16 * 3 * 128, so it fits
 * int16), and one vpdpwssd multiplies it by that row's 4-bit scale into the block sum;
 * a second multiplies the row's 4-bit min by the sub-block's bsum. Per block, the 16
 * (dall, dmin) halves of the 8 rows are one f16 conversion and one multiply by the
 * activation scale, and two fused multiply-adds scale all 8 rows' sums into f32.
 * Integer sums are exact for any code, -128 included (no sign trick); each row's f32
 * result is (lane r + lane r + 8) of the isum accumulator minus the same of the mins
 * accumulator: a fixed order, so the same bits for any thread split. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "cpu_internal.h"

#define AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,gfni,avx2,fma,f16c")))

/* GF(2) affine matrix whose output bits 0 and 1 are input bits 2f and 2f + 1 (byte
 * 7 - i of the qword is the row of output bit i); all other output bits are 0. */
#define FIELD(f) ((uint64_t)(1u << (2 * (f))) << 56 | (uint64_t)(1u << (2 * (f) + 1)) << 48)

/* The activation of one block, in the order the group kernel reads it: step vector
 * [p][f] lane j = the 4 codes 4f..4f+3 of sub-block 2p + j / 8; bsum vector [p] lane j =
 * bsums[2p + j / 8]; then the scale. */
typedef struct {
    __m512i step[8][4];
    __m512i bsum[8];
    float d;
    float pad[15];
} x8_act;

_Static_assert(sizeof(x8_act) == DS4_Q2K_X8_ACT_BYTES, "activation block size");

AVX512 void ds4_q2k_x8_act_avx512(const ds4_block_q8k *xq, size_t nb, void *out) {
    x8_act *a = out;
    const __m512i half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(4), 1);
    const __m512i one = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    for (size_t b = 0; b < nb; b++) {
        const __m512i bs = _mm512_cvtepi16_epi32(
            _mm256_loadu_si256((const __m256i *)(const void *)xq[b].bsums));
        for (int p = 0; p < 8; p++) {
            /* the 32 values of sub-blocks 2p, 2p + 1 as 8 dwords */
            const __m512i v = _mm512_castsi256_si512(
                _mm256_loadu_si256((const __m256i *)(const void *)(xq[b].q + 32 * p)));
            for (int f = 0; f < 4; f++)
                a[b].step[p][f] =
                    _mm512_permutexvar_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(f)), v);
            a[b].bsum[p] = _mm512_permutexvar_epi32(_mm512_add_epi32(one, _mm512_set1_epi32(2 * p)), bs);
        }
        a[b].d = xq[b].d;
        for (int i = 0; i < 15; i++) a[b].pad[i] = 0.0f;
    }
}

/* Sum of lanes r and r + 8 of v, for r = 0..7. */
AVX512 static inline __m256 fold(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

AVX512 static void group(const uint8_t *g, const x8_act *a, size_t nb, float *y) {
    const __m512i f0 = _mm512_set1_epi64((long long)FIELD(0));
    const __m512i f1 = _mm512_set1_epi64((long long)FIELD(1));
    const __m512i f2 = _mm512_set1_epi64((long long)FIELD(2));
    const __m512i f3 = _mm512_set1_epi64((long long)FIELD(3));
    const __m512i low4 = _mm512_set1_epi32(15);
    __m512 acc = _mm512_setzero_ps(), macc = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++, g += 8 * 84) {
        const x8_act *x = a + b;
        /* streaming: the block 4 ahead (672 bytes, contiguous; a prefetch never faults) */
        for (int l = 0; l < 8 * 84; l += 64) _mm_prefetch((const char *)(g + 4 * 8 * 84 + l), _MM_HINT_T0);
        __m512i isum = _mm512_setzero_si512(), msum = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            const __m512i codes = _mm512_loadu_si512((const void *)(g + 160 + 64 * p));
            const __m512i sm = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(g + 32 + 16 * p)));
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                            _mm512_gf2p8affine_epi64_epi8(codes, f0, 0), x->step[p][0]);
            s = _mm512_dpbusd_epi32(s, _mm512_gf2p8affine_epi64_epi8(codes, f1, 0), x->step[p][1]);
            s = _mm512_dpbusd_epi32(s, _mm512_gf2p8affine_epi64_epi8(codes, f2, 0), x->step[p][2]);
            s = _mm512_dpbusd_epi32(s, _mm512_gf2p8affine_epi64_epi8(codes, f3, 0), x->step[p][3]);
            /* low int16 of each dword: the sub-block sum times the scale; the high words
             * of the scale / min dwords are 0 */
            isum = _mm512_dpwssd_epi32(isum, s, _mm512_and_si512(sm, low4));
            msum = _mm512_dpwssd_epi32(msum, _mm512_srli_epi32(sm, 4), x->bsum[p]);
        }
        /* lanes 0..7: d * dall of rows 0..7, lanes 8..15: d * dmin */
        const __m512 dd = _mm512_mul_ps(
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)g)),
            _mm512_set1_ps(x->d));
        acc = _mm512_fmadd_ps(_mm512_shuffle_f32x4(dd, dd, 0x44), _mm512_cvtepi32_ps(isum), acc);
        macc = _mm512_fmadd_ps(_mm512_shuffle_f32x4(dd, dd, 0xee), _mm512_cvtepi32_ps(msum), macc);
    }
    _mm256_storeu_ps(y, _mm256_sub_ps(fold(acc), fold(macc)));
}

AVX512 void ds4_q2k_x8_groups_avx512(const uint8_t *packed, size_t groups, const void *xs,
                                     size_t nb, float *y) {
    for (size_t i = 0; i < groups; i++) group(packed + i * nb * 8 * 84, xs, nb, y + 8 * i);
}

#endif
