/* The weight products of the native forward: a range of output rows of one matrix
 * over a block of tokens, on the dot kernels of the chosen implementation. */
#include "fwd_internal.h"

int ds4_fw_matmul(const ds4_fw_mat *m, size_t rows_from, size_t rows_n, const float *x,
                  size_t x_stride, size_t n, float *y, size_t y_stride, int impl) {
    if (!m->data || rows_from + rows_n > m->rows) return DS4_CPU_BAD_SHAPE;
    if (x_stride != m->cols || y_stride != rows_n) return DS4_CPU_BAD_SHAPE;
    return ds4_cpu_matmul(m->type, m->data + rows_from * m->row_stride, m->row_stride, rows_n,
                          m->cols, x, n, y, impl);
}
