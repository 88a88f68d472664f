/*
 * The int8 product of a batched step: rows @ weight.T (+ bias) with int8 weights (one
 * scale per output), each row quantized here with its own scale, so each row's result is
 * bit for bit the same whatever the other rows.
 *
 * Why our own: torch's dynamic int8 kernel (FBGEMM on x86) quantizes its whole input with
 * one scale, so rows multiplied together would change each other's rounding, and one call
 * per row reads the weights again for every row (docs/batching.md). Here each row is
 * quantized on its own, from its own minimum and maximum (FBGEMM quantizes each call's
 * input the same way), and multiplied by integer dot products, which are exact: no
 * number of rows, block size or instruction set can change a row's result, and a block
 * of weight rows is read from memory once for all the rows.
 *
 * Built for the CPUs with VNNI (vpdpbusd: 32 unsigned bytes times 32 signed ones, added
 * four by four into int32, no saturation), in its AVX-512 form (Intel from Ice Lake and
 * Cascade Lake, AMD from Zen 4) and its AVX form (Alder Lake and later, the N100 class).
 * Without VNNI, AVX2's byte products saturate in int16 and were measured slower than
 * FBGEMM for one row, so the engine keeps FBGEMM there (rows_int8_supported() says 0).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* 1 where rows_linear_int8 runs with `instructions` (0: the best this CPU has; x86-64
 * with VNNI), 0 elsewhere. */
int rows_int8_supported(int instructions);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Outputs computed together: their weight rows are read from memory for the first row
 * and from the L1 cache for the others (8 was faster than 4, docs/batching.md). */
#define OUTPUTS_PER_BLOCK 8
/* Activations use all 8 bits: vpdpbusd adds its products in int32, which cannot
 * overflow (at most in x 255 x 127; rows_linear_int8 refuses inputs longer than
 * MAX_INPUTS). */
#define LEVELS 255
#define MAX_INPUTS (1 << 16)

/* The helpers need AVX2 only; both products below are built on them, so a row is
 * quantized by the same instructions whichever product runs, and its integer sums are
 * exact on either: a row's result is the same on every CPU that runs this. */
#pragma GCC push_options
#pragma GCC target("avx2,fma")

/* round(x * inverse) + zero, clamped to 0..LEVELS, for 8 values. */
static inline __m256i quantize8(__m256 x, __m256 inverse, __m256 zero)
{
    const __m256 rounded = _mm256_round_ps(_mm256_mul_ps(x, inverse), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(rounded, zero), _mm256_setzero_ps()),
                                         _mm256_set1_ps(LEVELS));
    return _mm256_cvtps_epi32(clamped);
}

/* 32 values to 32 bytes (the packs interleave 128-bit lanes; the permutation undoes it). */
static inline void quantize32(const float *x, uint8_t *q, __m256 inverse, __m256 zero)
{
    const __m256i a = quantize8(_mm256_loadu_ps(x), inverse, zero), b = quantize8(_mm256_loadu_ps(x + 8), inverse, zero);
    const __m256i c = quantize8(_mm256_loadu_ps(x + 16), inverse, zero), d = quantize8(_mm256_loadu_ps(x + 24), inverse, zero);
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* A row's scale and zero point from its range (which includes 0, so that 0 is exact),
 * and its bytes: round(x / scale) + zero, clamped to 0..LEVELS, by vector instructions
 * (the inputs after the last 32 through a padded copy, the same instructions). A row of
 * zeros, or of values that are not finite (garbage in either way), gets scale 1; no
 * input is undefined behaviour. */
static inline void quantize_row(const float *x, ptrdiff_t in, uint8_t *q, float *scale_out, int32_t *zero_out)
{
    const ptrdiff_t whole = in - in % 32;
    __m256 lo8 = _mm256_setzero_ps(), hi8 = _mm256_setzero_ps();
    for (ptrdiff_t k = 0; k < whole; k += 8) {
        lo8 = _mm256_min_ps(lo8, _mm256_loadu_ps(x + k));
        hi8 = _mm256_max_ps(hi8, _mm256_loadu_ps(x + k));
    }
    float lanes_lo[8], lanes_hi[8], lo = 0.f, hi = 0.f;
    _mm256_storeu_ps(lanes_lo, lo8);
    _mm256_storeu_ps(lanes_hi, hi8);
    for (int i = 0; i < 8; i++) {
        lo = lanes_lo[i] < lo ? lanes_lo[i] : lo;
        hi = lanes_hi[i] > hi ? lanes_hi[i] : hi;
    }
    for (ptrdiff_t k = whole; k < in; k++) {
        lo = x[k] < lo ? x[k] : lo;
        hi = x[k] > hi ? x[k] : hi;
    }
    float scale = (hi - lo) / LEVELS;
    if (!(scale > 0.f && scale < INFINITY))
        scale = 1.f;
    const float inverse = 1.f / scale;
    const __m256 inverse8 = _mm256_set1_ps(inverse);
    const int32_t zero = _mm_cvtsi128_si32(_mm256_castsi256_si128(quantize8(_mm256_set1_ps(-lo), inverse8, _mm256_setzero_ps())));
    const __m256 zero8 = _mm256_set1_ps((float)zero);
    for (ptrdiff_t k = 0; k < whole; k += 32)
        quantize32(x + k, q + k, inverse8, zero8);
    if (whole < in) {
        float rest[32] = {0};
        uint8_t rest_q[32];
        for (ptrdiff_t k = whole; k < in; k++)
            rest[k - whole] = x[k];
        quantize32(rest, rest_q, inverse8, zero8);
        for (ptrdiff_t k = whole; k < in; k++)
            q[k] = rest_q[k - whole];
    }
    *scale_out = scale;
    *zero_out = zero;
}

static inline int32_t sum_lanes(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* The inputs after the last 32. */
static inline int32_t dot_tail(const uint8_t *q, const int8_t *w, ptrdiff_t from, ptrdiff_t in)
{
    int32_t s = 0;
    for (ptrdiff_t k = from; k < in; k++)
        s += (int32_t)q[k] * w[k];
    return s;
}

#pragma GCC pop_options

/* 32 bytes an instruction: Alder Lake and later (the AVX form of VNNI). */
#pragma GCC push_options
#pragma GCC target("avx2,fma,avxvnni")
#define PRODUCT product_avx_vnni
#define DPBUSD _mm256_dpbusd_avx_epi32
#define VECTOR __m256i
#define WIDTH 32
#define ZERO _mm256_setzero_si256
#define LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define SUM sum_lanes
#include "rows_int8_body.h"
#pragma GCC pop_options

/* 64 bytes an instruction: AVX-512 VNNI (Ice Lake, Tiger Lake, Zen 4, ...); for one row
 * as fast as 32 (the weights come from memory), for a prompt's rows 1.2x faster. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vnni")
#define PRODUCT product_avx512_vnni
#define DPBUSD _mm512_dpbusd_epi32
#define VECTOR __m512i
#define WIDTH 64
#define ZERO _mm512_setzero_si512
#define LOAD(p) _mm512_loadu_si512((const void *)(p))
#define SUM _mm512_reduce_add_epi32
#include "rows_int8_body.h"
#pragma GCC pop_options

typedef void (*product_fn)(const float *, ptrdiff_t, ptrdiff_t, const int8_t *, ptrdiff_t, uint8_t *, float *,
                           int32_t *, int32_t *);

/* Which product: 0 the best this CPU runs, 1 the AVX form, 2 the AVX-512 one (the tests
 * check that they give the same bits). NULL where the CPU cannot run it. */
static product_fn product_for(int instructions)
{
    const int avx512 = __builtin_cpu_supports("avx512vnni"), avx = __builtin_cpu_supports("avxvnni");
    if ((instructions == 0 || instructions == 2) && avx512)
        return product_avx512_vnni;
    if ((instructions == 0 || instructions == 1) && avx)
        return product_avx_vnni;
    return NULL;
}

int rows_int8_supported(int instructions)
{
    return product_for(instructions) != NULL;
}

/* out[r, j] = (sum_k q[r, k] * w[j, k] - zero[r] * w_sums[j]) * scale[r] * w_scales[j] (+ bias[j]),
 * q being row r of x [rows, in] quantized; w [outs, in] int8, w_scales and w_sums [outs]
 * (w_sums[j] = sum_k w[j, k]), bias [outs] or NULL, out [rows, outs]; all contiguous;
 * `instructions` as for product_for. Returns 0, or -1 where it multiplies nothing: those
 * instructions not on this CPU, no memory, or inputs too long. */
int rows_linear_int8(int instructions, const float *x, ptrdiff_t rows, ptrdiff_t in, const int8_t *w,
                     const float *w_scales, const int32_t *w_sums, ptrdiff_t outs, const float *bias, float *out)
{
    const product_fn product = product_for(instructions);
    if (product == NULL || in > MAX_INPUTS)
        return -1;
    /* One buffer: the rows' bytes, then their scales, zero points and integer sums. */
    const size_t bytes = (size_t)(rows * in) + (size_t)rows * (sizeof(float) + sizeof(int32_t))
                         + (size_t)(rows * outs) * sizeof(int32_t) + 8;
    uint8_t *buffer = malloc(bytes);
    if (buffer == NULL)
        return -1;
    float *scales = (float *)(buffer + ((size_t)(rows * in) + 3) / 4 * 4);
    int32_t *zeros = (int32_t *)(scales + rows);
    int32_t *dots = zeros + rows;
    product(x, rows, in, w, outs, buffer, scales, zeros, dots);
    for (ptrdiff_t r = 0; r < rows; r++)
        for (ptrdiff_t j = 0; j < outs; j++) {
            const float value = (float)(dots[r * outs + j] - zeros[r] * w_sums[j]) * (scales[r] * w_scales[j]);
            out[r * outs + j] = bias ? value + bias[j] : value;
        }
    free(buffer);
    return 0;
}

#else /* not x86-64 with GCC: FBGEMM or QNNPACK multiply */

int rows_int8_supported(int instructions)
{
    (void)instructions;
    return 0;
}

int rows_linear_int8(int instructions, const float *x, ptrdiff_t rows, ptrdiff_t in, const int8_t *w,
                     const float *w_scales, const int32_t *w_sums, ptrdiff_t outs, const float *bias, float *out)
{
    (void)instructions, (void)x, (void)rows, (void)in, (void)w, (void)w_scales, (void)w_sums, (void)outs, (void)bias, (void)out;
    return -1;
}
#endif
