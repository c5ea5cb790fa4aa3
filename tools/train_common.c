#include "tools/train_common.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/progress.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "augment/transform_spec.h"
#include "kernels/backend.h"
#include "kernels/device_query.h"
#ifdef STOKE_CUDA_BACKEND
#include "kernels/cuda/cuda_device.h"
#endif

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_input_stats(const stk_meta *m, const char *path, float mean[3], float std[3])
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

void train_default_eval_transform(const stk_meta *m, int size, char *buf, size_t n)
{
    if (m->encoding == STK_ENCODING_JPEG)
        snprintf(buf, n, "resize:%d,center:%d", (int)lround(size * 256.0 / 224.0), size);
    else
        snprintf(buf, n, "center:%d", size);
}

stk_status train_meta_int(const stk_safetensors *f, const char *key, int64_t min, int64_t max,
                          int64_t *out)
{
    const char *v = stk_safetensors_meta(f, key);
    if (!v)
        return stk_error(STK_ERR_FORMAT,
                         "%s: not a Stoke training checkpoint (no \"%s\" in its "
                         "metadata)",
                         f->path, key);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < min || x > max)
        return stk_error(STK_ERR_CORRUPT,
                         "%s: damaged checkpoint metadata: \"%s\" is \"%.40s\", not an integer "
                         "in %lld..%lld",
                         f->path, key, v, (long long)min, (long long)max);
    *out = x;
    return STK_OK;
}

stk_status train_check_transform(const stk_meta *m, const char *flag, const char *spec, int *size)
{
    stk_transform t;
    stk_status st = stk_transform_parse(spec, &t);
    if (st != STK_OK) return stk_error_prefix(st, "%s", flag);
    if (!stk_transform_fixed_size(&t, size))
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: batches need one image size: add center:N, crop:N or rrc:N", flag,
                         spec);
    if (t.norm != STK_NORM_NONE)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: drop the norm token: training normalises on the device with the "
                         "dataset's statistics",
                         flag, spec);
    if (m->encoding == STK_ENCODING_RAW_U8) {
        uint32_t side = m->min_width < m->min_height ? m->min_width : m->min_height;
        if ((t.rrc || t.resize) && *size > (int)side)
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s %s makes %dx%d images from %ux%u raw images (a JPEG-sized "
                             "transform?): use pad:4,crop:%u,flip for training, center:%u for "
                             "evaluation",
                             flag, spec, *size, *size, m->min_width, m->min_height, side, side);
    }
    return STK_OK;
}

stk_status train_batch_tensors(const stk_device_batch *b, const float *mean, const float *std,
                               stk_tensor **x, stk_tensor **labels)
{
    int64_t xs[4] = {b->count, b->height, b->width, b->channels}, ls[1] = {b->count};
    stk_tensor *px;
    TRY(stk_tensor_wrap(b->device, STK_U8, 4, xs, b->data, &px));
    TRY(stk_input_u8_nhwc(px, mean, std, x));
    return stk_tensor_wrap(b->device, STK_I32, 1, ls, b->labels, labels);
}

stk_status train_count_correct(stk_tensor *logits, const int32_t *labels, int n, int *top1,
                               int *top5)
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
        float mine = row[labels[i]];
        int better = 0; /* classes ranked above the true one (ties count for it) */
        for (int64_t j = 0; j < c; j++)
            if (row[j] > mine || (row[j] == mine && j < labels[i])) better++;
        if (better == 0) (*top1)++;
        if (better < 5) (*top5)++;
    }
    free(copy);
    return STK_OK;
}

stk_status train_parse_device(const char *arg, stk_device *out)
{
    if (!strcmp(arg, "cpu")) {
        *out = STK_DEVICE_CPU;
        return STK_OK;
    }
    if (strncmp(arg, "cuda", 4) || (arg[4] && arg[4] != ':'))
        return stk_error(STK_ERR_INVALID_ARG, "--device %s: expected cpu, cuda or cuda:N", arg);
    *out = STK_DEVICE_CUDA;
    if (!arg[4]) return STK_OK;
    char *end;
    long n = strtol(arg + 5, &end, 10);
    if (!arg[5] || *end || n < 0 || n >= STK_MAX_GPUS)
        return stk_error(STK_ERR_INVALID_ARG, "--device %s: N must be a GPU number (0-%d)", arg,
                         STK_MAX_GPUS - 1);
#ifdef STOKE_CUDA_BACKEND
    return stk_cuda_select((int)n);
#else
    return STK_OK; /* train_device_open says why there is no GPU */
#endif
}

stk_status train_device_open(stk_device dev, const stk_copy_engine **ce)
{
    *ce = NULL;
    if (dev == STK_DEVICE_CPU) {
        *ce = stk_copy_engine_cpu();
        return STK_OK;
    }
    stk_cuda_report rep;
    stk_cuda_query(&rep);
    if (rep.count == 0)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "--device cuda: no CUDA device is available: %s; use --device cpu "
                         "(stoke devices lists what there is)",
                         rep.reason);
    const stk_backend *be;
    stk_status st = stk_backend_get(STK_DEVICE_CUDA, &be);
    if (st != STK_OK) return stk_error_prefix(st, "--device cuda");
#ifdef STOKE_CUDA_BACKEND
    return stk_copy_engine_cuda(ce);
#else
    return stk_error(STK_ERR_UNSUPPORTED, "--device cuda: this build has no CUDA backend");
#endif
}

stk_status train_evaluate(stk_model *m, const stk_copy_engine *ce, const char *path,
                          const char *transform, int batch, int workers, const float *mean,
                          const float *std, const char *progress_label, eval_result *r)
{
    memset(r, 0, sizeof *r);
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = batch;
    o.workers = workers;
    o.transform = transform;
    o.shuffle = false;
    o.fast_decode = false; /* evaluation decodes accurately */
    stk_loader *l;
    stk_status st = stk_loader_open(path, &o, &l);
    if (st != STK_OK) return st;
    stk_h2d *h = NULL;
    bool was_training = stk_model_is_training(m);
    stk_model_train(m, false);
    stk_no_grad_begin();
    double t0 = stk_clock_sec(), loss_sum = 0;
    uint64_t c1 = 0, c5 = 0;
    stk_progress p;
    stk_progress_init(&p, progress_label ? progress_label : "eval", stk_loader_batches(l),
                      progress_label ? stderr : NULL);
    if ((st = stk_h2d_open(l, ce, &h)) != STK_OK) goto out;
    if ((st = stk_loader_start_epoch(l, 0)) != STK_OK) goto out;
    stk_device_batch *b;
    uint64_t done = 0;
    while ((st = stk_h2d_next(h, &b)) == STK_OK) {
        stk_scope *s;
        if ((st = stk_scope_begin(&s)) != STK_OK) break;
        stk_tensor *x, *y, *logits, *loss;
        int t1, t5;
        if ((st = train_batch_tensors(b, mean, std, &x, &y)) == STK_OK &&
            (st = stk_model_forward(m, x, &logits)) == STK_OK &&
            (st = stk_cross_entropy(logits, y, 0.f, &loss)) == STK_OK &&
            (st = train_count_correct(logits, b->host_labels, b->count, &t1, &t5)) == STK_OK) {
            c1 += (uint64_t)t1;
            c5 += (uint64_t)t5;
            loss_sum += (double)stk_tensor_item(loss) * b->count;
            r->images += (uint64_t)b->count;
        }
        stk_scope_end(s);
        stk_h2d_release(h, b);
        if (st != STK_OK) break;
        stk_progress_update(&p, ++done);
    }
    if (st == STK_END) st = STK_OK;
    stk_progress_finish(&p);
out:
    stk_no_grad_end();
    stk_model_train(m, was_training);
    stk_h2d_close(h);
    stk_loader_close(l);
    if (st == STK_OK && r->images) {
        r->loss = loss_sum / (double)r->images;
        r->top1 = 100.0 * (double)c1 / (double)r->images;
        r->top5 = 100.0 * (double)c5 / (double)r->images;
    }
    r->seconds = stk_clock_sec() - t0;
    return st;
}
