/* IQ2_XXS lookup tables, expanded once from the shared level table
 * (docs/reference/formats.md §4.6). */
#include <pthread.h>

#include "cpu_internal.h"
#include "ds4_iq2xxs_levels.h"

uint64_t ds4_iq2_grid[256];
uint8_t ds4_iq2_ksigns[128];
uint64_t ds4_iq2_sign_mask[128];

static void build_tables(void) {
    static const uint8_t level_value[4] = {8, 25, 43, 0};
    for (int idx = 0; idx < 256; idx++) {
        uint64_t g = 0;
        for (int i = 0; i < 8; i++) {
            uint64_t v = level_value[(DS4_IQ2XXS_LEVELS[idx] >> (2 * i)) & 3];
            g |= v << (8 * i);
        }
        ds4_iq2_grid[idx] = g;
    }
    for (int s = 0; s < 128; s++) {
        int parity = __builtin_popcount((unsigned)s) & 1;
        uint8_t ks = (uint8_t)(s | (parity << 7));
        ds4_iq2_ksigns[s] = ks;
        uint64_t m = 0;
        for (int i = 0; i < 8; i++) m |= (uint64_t)((ks >> i) & 1 ? 0xffu : 0x01u) << (8 * i);
        ds4_iq2_sign_mask[s] = m;
    }
}

void ds4_cpu_tables_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_tables);
}
