/* Batches as tensors, normalisation, top-k counting (batch.h). */
#include "train/batch.h"

#include "common/log.h"
#include "engine/ops.h"

#include <math.h>
#include <stdlib.h>

void stk_input_norm_from_meta(const stk_meta *m, const char *path, float mean[3], float std[3])
{
    for (int c = 0; c < 3; c++) {
        mean[c] = m->has_stats ? (float)m->mean[c] : 0.5f;
        std[c] = m->has_stats && m->std[c] > 0 ? (float)m->std[c] : 0.5f;
    }
    if (!m->has_stats)
        stk_log_warn("%s has no per-channel statistics (packed with --no-validate?): "
                     "normalising with mean 0.5, std 0.5",
                     path);
}

stk_status stk_batch_tensors(const stk_device_batch *b, const float *mean, const float *std,
                             stk_tensor **x, stk_tensor **labels)
{
    int64_t xs[4] = {b->count, b->height, b->width, b->channels}, ls[1] = {b->count};
    stk_tensor *px;
    STK_TRY(stk_tensor_wrap(b->device, STK_U8, 4, xs, b->data, &px));
    STK_TRY(stk_input_u8_nhwc(px, mean, std, x));
    return stk_tensor_wrap(b->device, STK_I32, 1, ls, b->labels, labels);
}

/* Top-1 and top-5 counts, and the confusion matrix (when not NULL). */
static stk_status count(stk_tensor *logits, const int32_t *labels, int n, int *top1, int *top5,
                        uint64_t *confusion)
{
    int64_t c = stk_tensor_dim(logits, 1);
    *top1 = *top5 = 0;
    const float *v = stk_tensor_data(logits);
    float *copy = NULL;
    if (!v || !stk_tensor_is_contiguous(logits)) {
        size_t bytes = (size_t)stk_tensor_numel(logits) * sizeof(float);
        if (!(copy = malloc(bytes ? bytes : 1)))
            return stk_error(STK_ERR_NOMEM, "no memory for %zu bytes of logits", bytes);
        stk_status st = stk_tensor_to_host(logits, copy, bytes);
        if (st != STK_OK) {
            free(copy);
            return st;
        }
        v = copy;
    }
    for (int i = 0; i < n; i++) {
        const float *row = v + (int64_t)i * c;
        for (int64_t j = 0; j < c; j++)
            if (!isfinite(row[j])) { /* a NaN never ranks above the label: it would count */
                free(copy);
                return stk_error(STK_ERR_DIVERGED, "the logits of sample %d are not finite (%s)", i,
                                 isnan(row[j]) ? "NaN" : "infinite");
            }
        float mine = row[labels[i]];
        int better = 0; /* classes ranked above the true one (ties count for it) */
        for (int64_t j = 0; j < c; j++)
            if (row[j] > mine || (row[j] == mine && j < labels[i])) better++;
        if (better == 0) (*top1)++;
        if (better < 5) (*top5)++;
        if (confusion) { /* the prediction: the first of the highest logits */
            int64_t pred = 0;
            for (int64_t j = 1; j < c; j++)
                if (row[j] > row[pred]) pred = j;
            confusion[(int64_t)labels[i] * c + pred]++;
        }
    }
    free(copy);
    return STK_OK;
}

stk_status stk_batch_count_correct(stk_tensor *logits, const int32_t *labels, int n, int *top1,
                                   int *top5)
{
    return count(logits, labels, n, top1, top5, NULL);
}

stk_status stk_batch_count_confusion(stk_tensor *logits, const int32_t *labels, int n, int *top1,
                                     int *top5, uint64_t *confusion)
{
    return count(logits, labels, n, top1, top5, confusion);
}
