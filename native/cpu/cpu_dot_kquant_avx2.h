/* Q3_K, Q5_K and Q6_K . Q8_K AVX2 dots, included by cpu_dot_avx2.c. Codes are taken
 * unsigned (Q3_K q + 4, Q6_K q + 32, Q5_K as stored) so vpmaddubsw can multiply them by
 * the activation codes; the offset comes back through the activation's 16-value sums
 * (bsums). Each block's integer sum is exact and equal to the scalar kernel's
 * (cpu_dot_kquant_scalar.h), and is scaled with the same f32 operations in the same
 * order: the results are bit-identical to the scalar ones. */

AVX2 static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* int16 lanes: sub-block scale a in the low 128 bits, b in the high 128 bits. */
AVX2 static inline __m256i scale_pair(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
}

/* sum over 32 values of u * a (u unsigned <= 63), weighted per 16 by the pair (sa, sb). */
AVX2 static inline __m256i dot32_scaled(__m256i u, const int8_t *q8, __m256i scales) {
    __m256i p16 = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(const void *)q8));
    return _mm256_madd_epi16(p16, scales);
}

/* Q3_K's 16 signed scales as int16 (cpu_internal.h q3k_scale, 16 lanes at once). */
AVX2 static inline __m256i q3k_scales16(const uint8_t *sc) {
    uint32_t aux[4];
    memcpy(aux, sc, 12);
    uint32_t hi = aux[2];  /* bytes 8..11: two high bits per scale */
    aux[2] = ((aux[0] >> 4) & 0x0f0f0f0fu) | (((hi >> 4) & 0x03030303u) << 4);
    aux[3] = ((aux[1] >> 4) & 0x0f0f0f0fu) | (((hi >> 6) & 0x03030303u) << 4);
    aux[0] = (aux[0] & 0x0f0f0f0fu) | (((hi >> 0) & 0x03030303u) << 4);
    aux[1] = (aux[1] & 0x0f0f0f0fu) | (((hi >> 2) & 0x03030303u) << 4);
    __m128i b = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)aux),
                             _mm_set1_epi8(32));
    return _mm256_cvtepi8_epi16(b);
}

AVX2 static float dot_q3_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    /* int16 (s_2c, s_2c+1) in every dword -> s_2c in the low 128 bits, s_2c+1 in the high */
    const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                            2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 110) {
        const int8_t *q8 = y[b].q;
        __m256i sc16 = q3k_scales16(w + 96);  /* dword i: scales 2i, 2i + 1 */
        __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)y[b].bsums);
        int corr = hsum_epi32(_mm256_madd_epi16(sc16, bs));
        __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)w);
        __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(const void *)(w + 32 + 32 * h));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                int c = 4 * h + j;  /* values 32c .. 32c + 31: sub-blocks 2c, 2c + 1 */
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), m3);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, c), m1);
                __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
                __m256i pair = _mm256_shuffle_epi8(
                    _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(c)), spread);
                isum = _mm256_add_epi32(isum, dot32_scaled(u, q8 + 32 * c, pair));
            }
        }
        int total = hsum_epi32(isum) - 4 * corr;
        acc += (f16c(w + 108) * y[b].d) * (float)total;
    }
    return acc;
}

AVX2 static float dot_q5_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const __m256i m4 = _mm256_set1_epi8(15), m1 = _mm256_set1_epi8(1);
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 176) {
        const int8_t *q8 = y[b].q;
        int sc[8], mn[8], summs = 0;
        for (int j = 0; j < 8; j++) {
            q4k_scale_min(w + 4, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(w + 16));
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(w + 48 + 32 * c));
            __m256i lo = _mm256_and_si256(bits, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            lo = _mm256_or_si256(
                lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), m1), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), m1), 4));
            __m256i s0 = _mm256_set1_epi16((short)sc[2 * c]);
            __m256i s1 = _mm256_set1_epi16((short)sc[2 * c + 1]);
            isum = _mm256_add_epi32(isum, dot32_scaled(lo, q8 + 64 * c, s0));
            isum = _mm256_add_epi32(isum, dot32_scaled(hi, q8 + 64 * c + 32, s1));
        }
        float t1 = (y[b].d * f16c(w)) * (float)hsum_epi32(isum);
        float t2 = (y[b].d * f16c(w + 2)) * (float)summs;
        sumf += t1 - t2;
    }
    return sumf;
}

AVX2 static float dot_q6_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 210) {
        const int8_t *sc = (const int8_t *)(w + 192), *q8 = y[b].q;
        int corr = 0;
        for (int k = 0; k < 16; k++) corr += sc[k] * y[b].bsums[k];
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(w + 128 + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i l = k & 1 ? l1 : l0;
                __m256i lo = _mm256_and_si256(k < 2 ? l : _mm256_srli_epi16(l, 4), m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3);
                __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                int s = 8 * h + 2 * k;  /* values 128h + 32k ..: sub-blocks s, s + 1 */
                isum = _mm256_add_epi32(
                    isum, dot32_scaled(u, q8 + 128 * h + 32 * k, scale_pair(sc[s], sc[s + 1])));
            }
        }
        int total = hsum_epi32(isum) - 32 * corr;
        acc += (f16c(w + 208) * y[b].d) * (float)total;
    }
    return acc;
}
