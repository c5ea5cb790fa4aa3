/* stoke predict: a checkpoint's classes for image files, folders and .stoke
 * records. */
#include "augment/augment.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "decode/image_decode.h"
#include "decode/jpeg_decoder.h"
#include "decode/luma.h"
#include "engine/autograd.h"
#include "kernels/backend.h"
#include "run/checkpoint_read.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/predict_inputs.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct predict_args {
    const char *transform;
    int64_t top_k, batch, workers, threads;
    bool json;
} predict_args;

#define T predict_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_INT(T, top_k, "top-k", "K", 1, 1000, "the K likeliest classes per image, default 5"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "default: the checkpoint's evaluation transform (val_transform)"),
    STK_FLAG_INT(T, batch, "batch", "B", 1, 4096, "images per forward pass, default 64"),
    STK_FLAG_WORKERS(T, workers, "decoding threads, default: number of cores"),
    STK_FLAG_THREADS(T, threads),
    STK_FLAG_JSON(T, json,
                  "one JSON object per image on stdout (keys: path, top: a list of\n"
                  "{class, index, probability}), none for images that could not be read"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "predict",
    .usage = "stoke predict CHECKPOINT INPUT... [--top-k K] [--json]",
    .about = "Classify images with a checkpoint written by stoke train. An INPUT is a JPEG,\n"
             "PNG, WebP, BMP or PPM/PGM file (told by its bytes), a folder (its .jpg/.jpeg/\n"
             ".jpe/.jfif/.png/.webp/.bmp/.ppm/.pgm files, recursively, in name order), a\n"
             ".stoke dataset (each record, shown as FILE.stoke#INDEX) or one record of it\n"
             "(FILE.stoke#INDEX). Every image goes through the checkpoint's evaluation\n"
             "transform and its normalisation, in batches decoded on --workers threads;\n"
             "the classes are named as the training set named them (stoke pack). An image\n"
             "that cannot be read (damaged, not an image, too small for the transform) is\n"
             "skipped and named on stderr with the reason; the others are still\n"
             "predicted. Exit status 1 only when no image could be read.\n",
    .flags = flags,
    .min_args = 2,
    .max_args = 1 << 20};

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

static const char *class_name(const model_ctx *m, int k, char buf[16])
{
    if (m->d.class_names) return m->d.class_names[k];
    snprintf(buf, 16, "%d", k);
    return buf;
}

/* The top k of one image's logits, as probabilities (softmax in double). */
static void print_top(const model_ctx *m, const char *path, const float *z, int k, bool json)
{
    int n = m->d.cfg.classes;
    double top = z[0], sum = 0;
    for (int i = 1; i < n; i++) top = z[i] > top ? z[i] : top;
    for (int i = 0; i < n; i++) sum += exp((double)z[i] - top);
    int idx[1000];
    if (k > n) k = n;
    for (int t = 0; t < k; t++) { /* selection: k is small; ties go to the lower index */
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int u = 0; u < t && !taken; u++) taken = idx[u] == i;
            if (!taken && (best < 0 || z[i] > z[best])) best = i;
        }
        idx[t] = best;
    }
    char buf[16], num[STK_JSON_NUMBER];
    if (json) {
        printf("{\"path\": ");
        stk_json_write_string(stdout, path);
        printf(", \"top\": [");
        for (int t = 0; t < k; t++) {
            printf("%s{\"class\": ", t ? ", " : "");
            stk_json_write_string(stdout, class_name(m, idx[t], buf));
            printf(", \"index\": %d, \"probability\": %s}", idx[t],
                   stk_json_number(exp((double)z[idx[t]] - top) / sum, 6, num));
        }
        printf("]}\n");
        return;
    }
    char shown[512];
    printf("%s:", stk_printable(path, shown, sizeof shown));
    for (int t = 0; t < k; t++)
        printf("%s %s %.1f%%", t ? "," : "",
               stk_printable(class_name(m, idx[t], buf), shown, sizeof shown),
               100.0 * exp((double)z[idx[t]] - top) / sum);
    printf("\n");
}

static int run(const predict_args *a, model_ctx *m, predict_inputs *in)
{
    const char *spec = a->transform ? a->transform : m->d.val_transform;
    if (!spec)
        return stk_cli_usage("predict", "the checkpoint records no evaluation transform: "
                                        "give --transform");
    int workers = (int)a->workers, c = m->d.cfg.in_channels, s = m->d.cfg.image_size;
    job j = {.in = in, .size = s, .channels = c, .slot = (size_t)s * s * (size_t)c};
    stk_augment_options ao = {.spec = spec, .format = STK_PIXELS_U8_HWC, .channels = c};
    j.aug = calloc((size_t)workers, sizeof *j.aug);
    j.dec = calloc((size_t)workers, sizeof *j.dec);
    j.pixels = malloc((size_t)a->batch * j.slot);
    j.why = calloc((size_t)a->batch, sizeof *j.why);
    int *rows = calloc((size_t)a->batch, sizeof *rows);
    float *logits = calloc((size_t)a->batch * (size_t)m->d.cfg.classes, sizeof *logits);
    stk_pool *pool = NULL;
    int rc = STK_EXIT_ERROR;
    if (!j.aug || !j.dec || !j.pixels || !j.why || !rows || !logits) {
        fprintf(stderr, "stoke: out of memory\n");
        goto out;
    }
    for (int w = 0; w < workers; w++)
        if (stk_augment_create(&ao, &j.aug[w]) != STK_OK) {
            rc = stk_cli_usage("predict", "--transform %s: %s", spec, stk_last_error());
            goto out;
        }
    int ow, oh;
    if (stk_augment_output_size(j.aug[0], 4096, 4096, &ow, &oh) != STK_OK || ow != s || oh != s) {
        rc = stk_cli_usage("predict", "--transform %s gives %dx%d images; the model takes %d px",
                           spec, ow, oh, s);
        goto out;
    }
    for (int w = 0; w < workers; w++)
        if (stk_jpeg_decoder_create(64000000, &j.dec[w]) != STK_OK) goto fail;
    if (stk_pool_create(workers, &pool) != STK_OK) goto fail;
    stk_progress p;
    stk_progress_init(&p, "predict", in->n, stderr);
    uint64_t done = 0, skipped = 0;
    double t0 = stk_clock_sec();
    stk_no_grad_begin();
    for (uint64_t b0 = 0; b0 < in->n && !stk_cli_interrupted; b0 += (uint64_t)a->batch) {
        int nb = (int)(in->n - b0 < (uint64_t)a->batch ? in->n - b0 : (uint64_t)a->batch);
        j.items = in->items + b0;
        stk_pool_parallel_for(pool, (size_t)nb, decode_one, &j);
        int ok = 0;
        for (int k = 0; k < nb; k++)
            if (!j.why[k][0]) rows[ok++] = k;
        if (ok && forward(m, &j, ok, rows, logits) != STK_OK) {
            stk_no_grad_end();
            goto fail;
        }
        for (int k = 0, r = 0; k < nb; k++) {
            char shown[512];
            if (j.why[k][0]) {
                stk_progress_clear(&p);
                fprintf(stderr, "stoke: skipped %s: %s\n",
                        stk_printable(in->items[b0 + (uint64_t)k].path, shown, sizeof shown),
                        j.why[k]);
                skipped++;
                continue;
            }
            print_top(m, in->items[b0 + (uint64_t)k].path,
                      logits + (size_t)r++ * (size_t)m->d.cfg.classes, (int)a->top_k, a->json);
            done++;
        }
        fflush(stdout);
        stk_progress_update(&p, b0 + (uint64_t)nb);
    }
    stk_no_grad_end();
    stk_progress_finish(&p);
    double sec = stk_clock_sec() - t0;
    fprintf(stderr, "predict: %" PRIu64 " images in %.2f s (%.0f images/s), %" PRIu64 " skipped",
            done, sec, sec > 0 ? (double)done / sec : 0.0, skipped);
    if (in->not_images)
        fprintf(stderr, ", %" PRIu64 " file%s in folders without an image name not read",
                in->not_images, in->not_images == 1 ? "" : "s");
    fprintf(stderr, "\n");
    if (stk_cli_interrupted) {
        rc = STK_EXIT_INTERRUPTED;
    } else if (!done) {
        fprintf(stderr, "stoke: predict: no image could be read\n");
        rc = STK_EXIT_ERROR;
    } else {
        rc = STK_EXIT_OK;
    }
    goto out;
fail:
    rc = stk_cli_fail();
out:
    stk_pool_destroy(pool);
    for (int w = 0; j.aug && w < workers; w++) stk_augment_destroy(j.aug[w]);
    for (int w = 0; j.dec && w < workers; w++) stk_jpeg_decoder_destroy(j.dec[w]);
    free(j.aug), free(j.dec), free(j.pixels), free(j.why), free(rows), free(logits);
    return rc;
}

static int predict_main(int argc, char **argv)
{
    predict_args a = {
        .top_k = 5, .batch = 64, .workers = stk_cpu_count(), .threads = stk_cpu_count()};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    stk_cpu_set_threads((int)a.threads);
    model_ctx m = {0};
    if (stk_ckpt_describe(pos[0], &m.d) != STK_OK) return stk_cli_fail();
    for (int c = 0; c < 3; c++) {
        m.mean[c] = isnan(m.d.mean[0]) ? 0.5f : m.d.mean[c];
        m.std[c] = isnan(m.d.mean[0]) ? 0.5f : m.d.std[c];
    }
    if (isnan(m.d.mean[0]))
        fprintf(stderr,
                "stoke: warning: %s records no input normalisation; using mean 0.5, "
                "std 0.5\n",
                pos[0]);
    predict_inputs in = {0};
    int rc = STK_EXIT_OK;
    for (int i = 1; i < n_pos && rc == STK_EXIT_OK; i++)
        if (predict_inputs_add(&in, pos[i]) != STK_OK) rc = stk_cli_fail();
    if (rc == STK_EXIT_OK && stk_ckpt_load_model(&m.d, &m.model) != STK_OK) rc = stk_cli_fail();
    if (rc == STK_EXIT_OK) {
        stk_model_train(m.model, false);
        stk_cli_catch_interrupt();
        rc = run(&a, &m, &in);
    }
    stk_model_destroy(m.model);
    stk_ckpt_desc_free(&m.d);
    predict_inputs_free(&in);
    return rc;
}

const stk_command stk_cmd_predict = {"predict", "classify image files with a checkpoint", &cli,
                                     predict_main};
