/* Q3_K, Q5_K and Q6_K . Q8_K scalar dots (docs/reference/formats.md §5.13), included by
 * cpu_dot_scalar.c: the exact reference. Each block's integer sum is exact in int32
 * (|isum| < 2^27), then scaled in f32 in block order:
 *   Q3_K, Q6_K: acc += (d * d_a) * isum,  isum = sum_k s_k * sum_{v in k} q_v * a_v
 *   Q5_K:       acc += (d_a * d) * isum - (d_a * dmin) * summs  (as Q4_K). */

static float dot_q3_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 110) {
        const uint8_t *hmask = w, *qs = w + 32;
        const int8_t *q8 = y[b].q;
        int isum = 0;
        for (int k = 0; k < 16; k++) {
            int sub = 0;
            for (int v = 16 * k; v < 16 * k + 16; v++) {
                int h = v / 128, j = (v % 128) / 32, l = v % 32;
                int q = ((qs[32 * h + l] >> (2 * j)) & 3) - (((hmask[l] >> (v / 32)) & 1) ? 0 : 4);
                sub += q * q8[v];
            }
            isum += q3k_scale(w + 96, k) * sub;
        }
        acc += (f16_to_f32(rd_u16(w + 108)) * y[b].d) * (float)isum;
    }
    return acc;
}

static float dot_q5_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float sumf = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 176) {
        const uint8_t *qh = w + 16, *qs = w + 48;
        const int8_t *q8 = y[b].q;
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            q4k_scale_min(w + 4, j, &sc, &mn);
            int sub = 0;
            for (int l = 0; l < 32; l++) {
                int q = ((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | (((qh[l] >> j) & 1) << 4);
                sub += q * q8[32 * j + l];
            }
            isum += sc * sub;
            summs += mn * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        float t1 = (y[b].d * f16_to_f32(rd_u16(w))) * (float)isum;
        float t2 = (y[b].d * f16_to_f32(rd_u16(w + 2))) * (float)summs;
        sumf += t1 - t2;
    }
    return sumf;
}

static float dot_q6_k(const uint8_t *w, const void *act, size_t cols) {
    const ds4_block_q8k *y = act;
    float acc = 0.0f;
    for (size_t b = 0; b < cols / 256; b++, w += 210) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t *sc = (const int8_t *)(w + 192), *q8 = y[b].q;
        int isum = 0;
        for (int k = 0; k < 16; k++) {
            int sub = 0;
            for (int v = 16 * k; v < 16 * k + 16; v++) {
                int h = v / 128, r = v % 128;
                int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
                int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
                sub += ((lo | (hi << 4)) - 32) * q8[v];
            }
            isum += sc[k] * sub;
        }
        acc += (f16_to_f32(rd_u16(w + 208)) * y[b].d) * (float)isum;
    }
    return acc;
}
