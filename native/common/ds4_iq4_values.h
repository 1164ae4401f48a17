/* IQ4_NL / IQ4_XS levels (docs/reference/formats.md §4.9): the signed value of each
 * 4-bit code, shared by the dequantizer, the CPU dots and (as constants) the Vulkan
 * shaders. Checked against gguf-py's IQ4_NL.kvalues by tests/unit/quant. */
#ifndef DS4_IQ4_VALUES_H
#define DS4_IQ4_VALUES_H

#include <stdint.h>

static const int8_t DS4_IQ4_KVALUES[16] __attribute__((aligned(16))) = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

#endif
