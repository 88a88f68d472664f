/*
 * The body of the int8 product. rows_int8.c includes it once per instruction set, after
 * defining PRODUCT (the function's name), DPBUSD (the instruction that multiplies WIDTH
 * bytes of a row by as many of a weight row, each four products added into an int32
 * lane), VECTOR, WIDTH, ZERO, LOAD and SUM (that vector type, its width in bytes, a zero
 * vector, an unaligned load, the sum of its lanes); they are undefined at the end.
 */

/* Quantize each row on its own (see rows_int8.c), then dots[r, j] = sum_k q[r, k] * w[j, k]:
 * integer sums, exact, so the order they are added in cannot change them. */
static void PRODUCT(const float *x, ptrdiff_t rows, ptrdiff_t in, const int8_t *w, ptrdiff_t outs, uint8_t *q,
                    float *scales, int32_t *zeros, int32_t *dots)
{
    for (ptrdiff_t r = 0; r < rows; r++)
        quantize_row(x + r * in, in, q + r * in, &scales[r], &zeros[r]);
    const ptrdiff_t whole = in - in % WIDTH;
    ptrdiff_t j = 0;
    for (; j + OUTPUTS_PER_BLOCK <= outs; j += OUTPUTS_PER_BLOCK) {
        const int8_t *wj = w + j * in;
        for (ptrdiff_t r = 0; r < rows; r++) {
            const uint8_t *qr = q + r * in;
            VECTOR acc[OUTPUTS_PER_BLOCK];
            for (int o = 0; o < OUTPUTS_PER_BLOCK; o++)
                acc[o] = ZERO();
            for (ptrdiff_t k = 0; k < whole; k += WIDTH) {
                const VECTOR qv = LOAD(qr + k);
                for (int o = 0; o < OUTPUTS_PER_BLOCK; o++)
                    acc[o] = DPBUSD(acc[o], qv, LOAD(wj + o * in + k));
            }
            for (int o = 0; o < OUTPUTS_PER_BLOCK; o++)
                dots[r * outs + j + o] = SUM(acc[o]) + dot_tail(qr, wj + o * in, whole, in);
        }
    }
    for (; j < outs; j++) { /* the outputs after the last whole block */
        const int8_t *wj = w + j * in;
        for (ptrdiff_t r = 0; r < rows; r++) {
            const uint8_t *qr = q + r * in;
            VECTOR acc = ZERO();
            for (ptrdiff_t k = 0; k < whole; k += WIDTH)
                acc = DPBUSD(acc, LOAD(qr + k), LOAD(wj + k));
            dots[r * outs + j] = SUM(acc) + dot_tail(qr, wj, whole, in);
        }
    }
}

#undef PRODUCT
#undef DPBUSD
#undef VECTOR
#undef WIDTH
#undef ZERO
#undef LOAD
#undef SUM
