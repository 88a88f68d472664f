/*
 * The float32 product of a batched FlowLM step: rows @ weight.T (+ bias), each row's
 * result bit for bit the same whatever the other rows, at one row's speed for one row.
 *
 * Why our own: a reply's audio must not depend on what else is spoken beside it, and
 * the BLAS kernels torch calls round a row differently with other rows beside it
 * (MKL takes a matrix-vector kernel for one row, others for several; oneDNN's differ
 * from one row to two). Multiplying every row alone with MKL keeps the bits but pays
 * most of a row's time again for each row (docs/batching.md). Here every output of
 * every row is one and the same sequence of operations, whatever the number of rows,
 * and a block of the weight's rows is read from memory once for all the rows.
 *
 * Loaded with ctypes (wyoming_pocket_tts/engine/rows_kernel.py): no Python API, so no
 * Python headers are needed to build it.
 */
#include <stddef.h>
#include <string.h>

/* Eight lanes whatever the CPU: the same summation order everywhere a CPU runs it. */
typedef float lanes8 __attribute__((vector_size(32)));

/* Outputs computed together: their weight rows are read once per row of input,
 * from memory for the first row and from the L1 cache for the others. */
#define OUTPUTS_PER_BLOCK 8

/* x86-64: an AVX2 + FMA build, picked at load time on CPUs that have them, and a
 * baseline one. A process always runs the same one, so its rounding never changes;
 * rows_linear_f32_vectorized() says which (the baseline one is slower than MKL). */
#if defined(__x86_64__) && defined(__GNUC__)
#define VERSIONS __attribute__((target_clones("arch=x86-64-v3", "default")))
/* The baseline build's 32-byte vectors change no ABI that matters: they never leave
 * this file. */
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define VERSIONS
#endif

static inline lanes8 load8(const float *p)
{
    lanes8 v;
    memcpy(&v, p, sizeof v); /* unaligned load */
    return v;
}

/* A fixed order, not the compiler's choice. */
static inline float sum8(const lanes8 *acc)
{
    const lanes8 v = *acc;
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* One output: the dot product of a row and a weight row, plus its bias. */
static inline float finish(const lanes8 *acc, const float *x, const float *w, ptrdiff_t from, ptrdiff_t in,
                           const float *bias, ptrdiff_t j)
{
    float s = sum8(acc);
    for (ptrdiff_t k = from; k < in; k++)
        s += x[k] * w[k];
    return bias ? s + bias[j] : s;
}

/* out[r, j] = sum_k x[r, k] * w[j, k] (+ bias[j]); x [rows, in], w [outs, in], out
 * [rows, outs], all contiguous; bias [outs] or NULL. */
VERSIONS
void rows_linear_f32(const float *x, ptrdiff_t rows, ptrdiff_t in, const float *w, ptrdiff_t outs,
                     const float *bias, float *out)
{
    const ptrdiff_t whole = in - in % 8;
    ptrdiff_t j = 0;
    for (; j + OUTPUTS_PER_BLOCK <= outs; j += OUTPUTS_PER_BLOCK) {
        const float *wj = w + j * in;
        for (ptrdiff_t r = 0; r < rows; r++) {
            const float *xr = x + r * in;
            lanes8 acc[OUTPUTS_PER_BLOCK] = {0};
            for (ptrdiff_t k = 0; k < whole; k += 8) {
                lanes8 xv = load8(xr + k);
                for (int o = 0; o < OUTPUTS_PER_BLOCK; o++)
                    acc[o] += xv * load8(wj + o * in + k);
            }
            for (int o = 0; o < OUTPUTS_PER_BLOCK; o++)
                out[r * outs + j + o] = finish(&acc[o], xr, wj + o * in, whole, in, bias, j + o);
        }
    }
    for (; j < outs; j++) { /* the outputs after the last whole block */
        const float *wj = w + j * in;
        for (ptrdiff_t r = 0; r < rows; r++) {
            const float *xr = x + r * in;
            lanes8 acc = {0};
            for (ptrdiff_t k = 0; k < whole; k += 8)
                acc += load8(xr + k) * load8(wj + k);
            out[r * outs + j] = finish(&acc, xr, wj, whole, in, bias, j);
        }
    }
}

/* 1 where this build multiplies with 8-lane vector instructions (x86-64 with AVX2 and
 * FMA), faster than torch's kernels for one row and for several; 0 elsewhere, where
 * it was not measured to be (the baseline x86 build was slower than MKL for one row). */
int rows_linear_f32_vectorized(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("x86-64-v3") != 0; /* what target_clones picks by */
#else
    return 0;
#endif
}
