/* A checkpoint's classes for images (predict.h): the inputs listed
 * (predict_inputs.c), decoded and transformed on a pool of workers a batch
 * at a time, the model's forward pass, the top k by softmax. */
#include "run/predict.h"

#include "augment/augment.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/thread_pool.h"
#include "decode/image_decode.h"
#include "decode/jpeg_decoder.h"
#include "decode/luma.h"
#include "engine/autograd.h"
#include "run/checkpoint_read.h"
#include "run/predict_inputs_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

stk_predict_request stk_predict_defaults(void)
{
    return (stk_predict_request){.top_k = 5, .batch = 128};
}

/* One batch's images: pixels in slots of S x S x C, a status per image. */
typedef struct job {
    const predict_inputs *in;
    const predict_item *items; /* the batch */
    stk_augment **aug;         /* per worker */
    stk_jpeg_decoder **dec;    /* per worker: the fallback decode */
    uint8_t *pixels;           /* batch x slot */
    size_t slot;
    int size, channels;
    char (*why)[256]; /* "" ok */
} job;

/* Gray to RGB or RGB to gray (PIL's L), for a decoded image whose channels
 * are not the model's. */
static uint8_t *convert_channels(const uint8_t *px, uint32_t w, uint32_t h, int from, int to)
{
    uint8_t *out = malloc((size_t)w * h * (size_t)to);
    for (size_t i = 0; out && i < (size_t)w * h; i++) {
        const uint8_t *p = px + i * (size_t)from;
        if (to == 3)
            out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = p[0];
        else
            out[i] = stk_image_luma(p);
    }
    return out;
}

/* A JPEG the loader's path cannot take (CMYK, a colour count other than
 * the model's, ...): decoded whole, then transformed as raw pixels. */
static stk_status jpeg_whole(job *j, int worker, const uint8_t *data, size_t len, size_t k,
                             stk_augment_out *out)
{
    const uint8_t *px;
    uint32_t w, h;
    int c;
    STK_TRY(stk_jpeg_decoder_pixels(j->dec[worker], data, len, 8, &px, &w, &h, &c));
    uint8_t *conv = c == j->channels ? NULL : convert_channels(px, w, h, c, j->channels);
    if (c != j->channels && !conv) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_sample s = {.encoding = 2,
                    .data = conv ? conv : px,
                    .len = (size_t)w * h * (size_t)j->channels,
                    .width = w,
                    .height = h,
                    .channels = j->channels};
    stk_status st = stk_augment_apply(j->aug[worker], &s, 0, k, out);
    free(conv);
    return st;
}

static stk_status one_image(job *j, size_t k, int worker)
{
    const predict_item *it = &j->items[k];
    stk_augment_out out = {.data = j->pixels + k * j->slot,
                           .stride = (size_t)j->size * (size_t)j->channels,
                           .capacity = j->slot};
    if (it->dataset >= 0) {
        stk_record r;
        STK_TRY(stk_dataset_get(j->in->datasets[it->dataset], it->record, &r, true));
        stk_sample s = {.encoding = r.encoding,
                        .data = r.payload,
                        .len = r.payload_len,
                        .width = r.width,
                        .height = r.height,
                        .channels = r.channels};
        return stk_augment_apply(j->aug[worker], &s, 0, it->record, &out);
    }
    uint8_t *data;
    size_t len;
    STK_TRY(stk_file_read_all(it->path, 1ull << 30, &data, &len));
    stk_status st;
    if (stk_image_decodable(stk_image_sniff(data, len))) { /* PNG, WebP, BMP, PPM/PGM */
        uint8_t *px;
        uint32_t w, h;
        int c;
        st = stk_image_decode(data, len, j->channels, 0, &px, &w, &h, &c);
        if (st == STK_OK) {
            stk_sample s = {.encoding = 2,
                            .data = px,
                            .len = (size_t)w * h * (size_t)j->channels,
                            .width = w,
                            .height = h,
                            .channels = j->channels};
            st = stk_augment_apply(j->aug[worker], &s, 0, k, &out);
            free(px);
        }
    } else {
        stk_jpeg_info info;
        st = stk_jpeg_decoder_header(j->dec[worker], data, len, &info);
        if (st == STK_ERR_UNSUPPORTED && !(len >= 2 && data[0] == 0xff && data[1] == 0xd8))
            st = stk_error(STK_ERR_UNSUPPORTED,
                           "not an image Stoke reads (JPEG, PNG, WebP, BMP, PPM/PGM)");
        if (st == STK_OK && info.kind != STK_JPEG_CMYK && info.components == j->channels) {
            stk_sample s = {.encoding = 1,
                            .data = data,
                            .len = len,
                            .width = info.width,
                            .height = info.height,
                            .channels = info.components};
            st = stk_augment_apply(j->aug[worker], &s, 0, k, &out);
        } else if (st == STK_OK) {
            st = jpeg_whole(j, worker, data, len, k, &out);
        }
    }
    free(data);
    return st;
}

static void decode_one(void *ctx, size_t k, int worker)
{
    job *j = ctx;
    const predict_item *it = &j->items[k];
    j->why[k][0] = '\0';
    if (it->why)
        snprintf(j->why[k], sizeof j->why[k], "%s", it->why);
    else if (one_image(j, k, worker) != STK_OK)
        snprintf(j->why[k], sizeof j->why[k], "%s", stk_last_error());
}

/* What the batch's readable images are, and their logits. */
typedef struct model_ctx {
    stk_model *model;
    stk_ckpt_desc d;
    float mean[3], std[3];
} model_ctx;

static stk_status forward(const model_ctx *m, const job *j, int n, const int *rows, float *logits)
{
    int s = j->size, c = j->channels;
    size_t plane = (size_t)s * (size_t)s;
    float *x = malloc((size_t)n * (size_t)c * plane * sizeof *x);
    if (!x) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int b = 0; b < n; b++) { /* u8 HWC -> normalised f32 CHW */
        const uint8_t *px = j->pixels + (size_t)rows[b] * j->slot;
        for (int ch = 0; ch < c; ch++)
            for (size_t i = 0; i < plane; i++)
                x[((size_t)b * (size_t)c + (size_t)ch) * plane + i] =
                    ((float)px[i * (size_t)c + (size_t)ch] / 255.f - m->mean[ch]) / m->std[ch];
    }
    int64_t shape[4] = {n, c, s, s};
    stk_tensor *in = NULL, *out = NULL;
    stk_status st = stk_tensor_from_host(STK_F32, 4, shape, x, &in);
    if (st == STK_OK) st = stk_model_forward(m->model, in, &out);
    if (st == STK_OK)
        st = stk_tensor_to_host(out, logits, (size_t)n * (size_t)m->d.cfg.classes * sizeof *logits);
    stk_tensor_release(in);
    stk_tensor_release(out);
    free(x);
    return st;
}

/* The top k of one image's logits, as probabilities (softmax in double),
 * to the hooks. */
static stk_status give_top(const model_ctx *m, const stk_predict_hooks *h, const char *path,
                           const float *z, int k)
{
    int n = m->d.cfg.classes;
    double top = z[0], sum = 0;
    for (int i = 1; i < n; i++) top = z[i] > top ? z[i] : top;
    for (int i = 0; i < n; i++) sum += exp((double)z[i] - top);
    int idx[1000];
    double prob[1000];
    const char *name[1000];
    char numbers[1000][12];
    if (k > n) k = n;
    for (int t = 0; t < k; t++) { /* selection: k is small; ties go to the lower index */
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int u = 0; u < t && !taken; u++) taken = idx[u] == i;
            if (!taken && (best < 0 || z[i] > z[best])) best = i;
        }
        idx[t] = best;
        prob[t] = exp((double)z[best] - top) / sum;
        snprintf(numbers[t], sizeof numbers[t], "%d", best);
        name[t] = m->d.class_names ? m->d.class_names[best] : numbers[t];
    }
    stk_prediction p = {.path = path, .k = k, .index = idx, .probability = prob, .name = name};
    return h->on_image ? h->on_image(h->ctx, &p) : STK_OK;
}

/* The batches, each decoded on the pool, forwarded and given to the hooks. */
static stk_status batches(const stk_predict_request *q, const model_ctx *m, predict_inputs *in,
                          job *j, stk_pool *pool, int *rows, float *logits, stk_predict_summary *s)
{
    const stk_predict_hooks *h = &q->hooks;
    if (h->progress) h->progress(h->ctx, 0, in->n);
    for (uint64_t b0 = 0; b0 < in->n; b0 += (uint64_t)q->batch) {
        if (h->cancel && *h->cancel) {
            s->cancelled = true;
            break;
        }
        int nb = (int)(in->n - b0 < (uint64_t)q->batch ? in->n - b0 : (uint64_t)q->batch);
        j->items = in->items + b0;
        stk_pool_parallel_for(pool, (size_t)nb, decode_one, j);
        int ok = 0;
        for (int k = 0; k < nb; k++)
            if (!j->why[k][0]) rows[ok++] = k;
        if (ok) STK_TRY(forward(m, j, ok, rows, logits));
        for (int k = 0, r = 0; k < nb; k++) {
            const char *path = in->items[b0 + (uint64_t)k].path;
            if (j->why[k][0]) {
                if (h->on_skip) h->on_skip(h->ctx, path, j->why[k]);
                s->skipped++;
                continue;
            }
            STK_TRY(
                give_top(m, h, path, logits + (size_t)r++ * (size_t)m->d.cfg.classes, q->top_k));
            s->done++;
        }
        if (h->progress) h->progress(h->ctx, b0 + (uint64_t)nb, in->n);
    }
    return STK_OK;
}

static stk_status run(const stk_predict_request *q, model_ctx *m, predict_inputs *in,
                      stk_predict_summary *s)
{
    const char *spec = q->transform ? q->transform : m->d.val_transform;
    if (!spec) {
        s->bad_transform = true;
        return stk_error(STK_ERR_INVALID_ARG, "the checkpoint records no evaluation transform: "
                                              "give --transform");
    }
    int workers = q->workers ? q->workers : stk_cpu_count();
    int c = m->d.cfg.in_channels, size = m->d.cfg.image_size;
    job j = {.in = in, .size = size, .channels = c, .slot = (size_t)size * size * (size_t)c};
    stk_augment_options ao = {.spec = spec, .format = STK_PIXELS_U8_HWC, .channels = c};
    j.aug = calloc((size_t)workers, sizeof *j.aug);
    j.dec = calloc((size_t)workers, sizeof *j.dec);
    j.pixels = malloc((size_t)q->batch * j.slot);
    j.why = calloc((size_t)q->batch, sizeof *j.why);
    int *rows = calloc((size_t)q->batch, sizeof *rows);
    float *logits = calloc((size_t)q->batch * (size_t)m->d.cfg.classes, sizeof *logits);
    stk_pool *pool = NULL;
    stk_status st = STK_OK;
    if (!j.aug || !j.dec || !j.pixels || !j.why || !rows || !logits)
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    for (int w = 0; w < workers && st == STK_OK; w++)
        if (stk_augment_create(&ao, &j.aug[w]) != STK_OK) {
            s->bad_transform = true;
            st = stk_error_prefix(STK_ERR_INVALID_ARG, "--transform %s", spec);
        }
    int ow = 0, oh = 0;
    if (st == STK_OK && (stk_augment_output_size(j.aug[0], 4096, 4096, &ow, &oh) != STK_OK ||
                         ow != size || oh != size)) {
        s->bad_transform = true;
        st = stk_error(STK_ERR_INVALID_ARG,
                       "--transform %s gives %dx%d images; the model takes %d px", spec, ow, oh,
                       size);
    }
    for (int w = 0; w < workers && st == STK_OK; w++)
        st = stk_jpeg_decoder_create(64000000, &j.dec[w]);
    if (st == STK_OK) st = stk_pool_create(workers, &pool);
    double t0 = stk_clock_sec();
    if (st == STK_OK) {
        stk_no_grad_begin();
        st = batches(q, m, in, &j, pool, rows, logits, s);
        stk_no_grad_end();
    }
    s->seconds = stk_clock_sec() - t0;
    stk_pool_destroy(pool);
    for (int w = 0; j.aug && w < workers; w++) stk_augment_destroy(j.aug[w]);
    for (int w = 0; j.dec && w < workers; w++) stk_jpeg_decoder_destroy(j.dec[w]);
    free(j.aug), free(j.dec), free(j.pixels), free(j.why), free(rows), free(logits);
    return st;
}

stk_status stk_predict(const stk_predict_request *q, stk_predict_summary *s)
{
    memset(s, 0, sizeof *s);
    if (!q->checkpoint || q->n_inputs < 1)
        return stk_error(STK_ERR_INVALID_ARG, "a checkpoint and at least one input are required");
    if (q->top_k < 1 || q->top_k > 1000 || q->batch < 1 || q->batch > 4096 || q->workers < 0 ||
        q->workers > 1024)
        return stk_error(STK_ERR_INVALID_ARG,
                         "top_k %d, batch %d, workers %d: expected 1..1000, 1..4096, 0..1024",
                         q->top_k, q->batch, q->workers);
    model_ctx m = {0};
    STK_TRY(stk_ckpt_describe(q->checkpoint, &m.d));
    for (int c = 0; c < 3; c++) {
        m.mean[c] = isnan(m.d.mean[0]) ? 0.5f : m.d.mean[c];
        m.std[c] = isnan(m.d.mean[0]) ? 0.5f : m.d.std[c];
    }
    if (isnan(m.d.mean[0]) && q->hooks.notice) {
        char line[600];
        snprintf(line, sizeof line, "%s records no input normalisation; using mean 0.5, std 0.5",
                 q->checkpoint);
        q->hooks.notice(q->hooks.ctx, line);
    }
    predict_inputs in = {0};
    stk_status st = STK_OK;
    for (int i = 0; i < q->n_inputs && st == STK_OK; i++)
        st = predict_inputs_add(&in, q->inputs[i]);
    s->images = in.n, s->not_images = in.not_images;
    if (st == STK_OK) st = stk_ckpt_load_model(&m.d, &m.model);
    if (st == STK_OK) {
        stk_model_train(m.model, false);
        st = run(q, &m, &in, s);
    }
    stk_model_destroy(m.model);
    stk_ckpt_desc_free(&m.d);
    predict_inputs_free(&in);
    return st;
}
