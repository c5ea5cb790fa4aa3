/* Softmax, cross-entropy and dropout on the GPU. The rows (a batch of
 * logits, tens to a thousand classes) are computed one thread per row with
 * kernels/loss_math.h, the CPU's own row functions; dropout draws its mask
 * from the same Philox counters as the CPU (scalar_math.h). */
#include "kernels/cuda/kernels.h"

#include "kernels/cuda/launch.h"
#include "kernels/loss_math.h"

STK_GLOBAL void softmax_kernel(int64_t rows, int64_t cols, const float *x, float *y, int log)
{
    STK_GRID_STRIDE(r, rows) stk_softmax_row(cols, x + r * cols, y + r * cols, log);
}

STK_GLOBAL void softmax_backward_kernel(int64_t rows, int64_t cols, const float *y, const float *gy,
                                        float *gx, int log)
{
    STK_GRID_STRIDE(r, rows)
    stk_softmax_backward_row(cols, y + r * cols, gy + r * cols, gx + r * cols, log);
}

/* Per row: log-softmax and the row's loss; a label out of range marks the
 * row in `bad` (a separate array: no atomics) and contributes nothing. */
STK_GLOBAL void ce_rows_kernel(int64_t rows, int64_t cols, const float *x, const int32_t *labels,
                               float smoothing, float *logp, float *row_loss, int64_t *bad)
{
    STK_GRID_STRIDE(r, rows)
    {
        stk_softmax_row(cols, x + r * cols, logp + r * cols, 1);
        int32_t l = labels[r];
        bool ok = l >= 0 && l < cols;
        row_loss[r] = ok ? (float)stk_ce_row_loss(cols, logp + r * cols, l, smoothing) : 0.f;
        bad[r] = ok ? rows : r;
    }
}

/* One thread: the mean loss and the first bad row, in row order. */
STK_GLOBAL void ce_total_kernel(int64_t rows, const float *row_loss, int64_t *bad, float *loss)
{
    STK_GRID_STRIDE(t, 1)
    {
        double total = 0.0;
        int64_t first = rows;
        for (int64_t r = 0; r < rows; r++) {
            total += row_loss[r];
            if (bad[r] < first) first = bad[r];
        }
        *loss = rows ? (float)(total / (double)rows) : 0.f;
        bad[0] = first;
    }
}

STK_GLOBAL void ce_backward_kernel(int64_t rows, int64_t cols, const float *logp,
                                   const int32_t *labels, float smoothing, const float *gloss,
                                   float *gx)
{
    STK_GRID_STRIDE(r, rows)
    stk_ce_backward_row(cols, logp + r * cols, labels[r], smoothing, *gloss / (float)rows,
                        gx + r * cols);
}

STK_GLOBAL void dropout_kernel(int64_t n, float scale, uint64_t cut, uint64_t seed, uint64_t stream,
                               const float *x, float *y, uint8_t *mask)
{
    STK_GRID_STRIDE(b, (n + 3) / 4) stk_dropout_block(seed, stream, b, n, cut, scale, x, y, mask);
}

STK_GLOBAL void dropout_backward_kernel(int64_t n, float scale, const uint8_t *mask,
                                        const float *gy, float *gx)
{
    STK_GRID_STRIDE(i, n) gx[i] = mask[i] ? gy[i] * scale : 0.f;
}

void stk_cuda_softmax_forward(int64_t rows, int64_t cols, const float *x, float *y, bool log,
                              stk_stream_t s)
{
    if (rows > 0)
        STK_LAUNCH(softmax_kernel, stk_blocks(rows), STK_BLOCK, s, rows, cols, x, y, (int)log);
}

void stk_cuda_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy,
                               float *gx, bool log, stk_stream_t s)
{
    if (rows > 0)
        STK_LAUNCH(softmax_backward_kernel, stk_blocks(rows), STK_BLOCK, s, rows, cols, y, gy, gx,
                   (int)log);
}

void stk_cuda_cross_entropy_forward(int64_t rows, int64_t cols, const float *logits,
                                    const int32_t *labels, float smoothing, float *logp,
                                    float *row_loss, float *loss, int64_t *bad_row, stk_stream_t s)
{
    if (rows <= 0) return;
    STK_LAUNCH(ce_rows_kernel, stk_blocks(rows), STK_BLOCK, s, rows, cols, logits, labels,
               smoothing, logp, row_loss, bad_row);
    STK_LAUNCH(ce_total_kernel, 1, 1, s, rows, row_loss, bad_row, loss);
}

void stk_cuda_cross_entropy_backward(int64_t rows, int64_t cols, const float *logp,
                                     const int32_t *labels, float smoothing, const float *gloss,
                                     float *gx, stk_stream_t s)
{
    if (rows > 0)
        STK_LAUNCH(ce_backward_kernel, stk_blocks(rows), STK_BLOCK, s, rows, cols, logp, labels,
                   smoothing, gloss, gx);
}

void stk_cuda_dropout_forward(int64_t n, float p, uint64_t seed, uint64_t stream, const float *x,
                              float *y, uint8_t *mask, stk_stream_t s)
{
    uint64_t cut = (uint64_t)((double)p * 4294967296.0);
    float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
    if (n > 0)
        STK_LAUNCH(dropout_kernel, stk_blocks((n + 3) / 4), STK_BLOCK, s, n, scale, cut, seed,
                   stream, x, y, mask);
}

void stk_cuda_dropout_backward(int64_t n, float p, const uint8_t *mask, const float *gy, float *gx,
                               stk_stream_t s)
{
    float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
    if (n > 0)
        STK_LAUNCH(dropout_backward_kernel, stk_blocks(n), STK_BLOCK, s, n, scale, mask, gy, gx);
}
