/* stoke peek: look at what the model will see. */
#include "augment/augment.h"
#include "loader/loader.h"
#include "storage/dataset.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/image_write.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct peek_args {
    const char *transform, *out;
    int64_t index, count, seed, epoch;
} peek_args;

#define T peek_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "the transform (default: the training default for the dataset:\n"
                  "rrc:224,flip for JPEG, pad:4,crop:SIZE,flip for raw images);\n"
                  "none = the stored image as decoded. Spec tokens:\n"
                  "  rrc:SIZE[:SMIN:SMAX]  RandomResizedCrop (scale 0.08..1, ratio 3/4..4/3)\n"
                  "  resize:N              shorter side to N\n"
                  "  center:N              CenterCrop\n"
                  "  pad:P,crop:N          RandomCrop with zero padding\n"
                  "  flip[:P]              RandomHorizontalFlip (p 0.5)\n"
                  "  norm[:imagenet|:MEAN/STD]  (float outputs only; ignored here)"),
    STK_FLAG_INT(T, index, "index", "I", 0, INT64_MAX,
                 "only sample I, at its exact size, no border (compare pixel for\n"
                 "pixel with other tools)"),
    STK_FLAG_INT(T, count, "count", "N", 1, 4096, "samples 0..N-1 in a grid (default 16)"),
    STK_FLAG_SEED(T, seed, "augmentation seed (default 0)"),
    STK_FLAG_INT(T, epoch, "epoch", "E", 0, INT64_MAX,
                 "epoch (default 0): another epoch gives other random crops"),
    STK_FLAG_TEXT(T, out, "out", "FILE", ".ppm/.pgm (lossless) or .jpg (default peek.ppm)"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "peek",
    .usage = "stoke peek [OPTIONS] DATA.stoke",
    .about = "Write transformed samples as one grid image, to see what a model is fed; the\n"
             "labels are printed on stdout (index, label, class, source name).\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected one DATA.stoke"};

#define BORDER 2

static int peek_main(int argc, char **argv)
{
    peek_args pa = {.out = "peek.ppm", .index = -1};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &pa, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    const char *spec = pa.transform, *out_path = pa.out;
    int64_t index = pa.index, count = pa.count ? pa.count : 16, seed = pa.seed, epoch = pa.epoch;
    bool have_count = pa.count != 0;
    if (index >= 0 && have_count)
        return stk_cli_usage("peek", "--index and --count do not go together");
    if (!stk_image_path_supported(out_path))
        return stk_cli_usage("peek", "--out %s: write .ppm/.pgm (lossless) or .jpg", out_path);
    stk_dataset *ds;
    if (stk_dataset_open(pos[0], &ds) != STK_OK) return stk_cli_fail();
    const stk_meta *m = stk_dataset_meta(ds);
    char spec_buf[128];
    if (!spec) {
        stk_loader_default_transform(m, spec_buf, sizeof spec_buf);
        spec = spec_buf;
    }
    int rc = STK_EXIT_ERROR;
    uint8_t *grid = NULL, **cells = NULL;
    int *cw = NULL, *chh = NULL;
    stk_augment *a = NULL;
    stk_augment_options o = {.spec = spec,
                             .format = STK_PIXELS_U8_HWC,
                             .channels = m->channels,
                             .seed = (uint64_t)seed,
                             .max_pixels = (uint64_t)1 << 36};
    for (int c = 0; c < 3; c++) o.mean[c] = m->mean[c], o.std[c] = m->has_stats ? m->std[c] : 1;
    if (stk_augment_create(&o, &a) != STK_OK) {
        rc = stk_cli_usage("peek", "%s", stk_last_error());
        goto out;
    }
    int big_w, big_h; /* what the largest image becomes */
    if (stk_augment_output_size(a, m->max_width, m->max_height, &big_w, &big_h) ==
            STK_OK &&
        stk_loader_check_upscale(pos[0], spec, m, big_w, big_h) != STK_OK) {
        rc = stk_cli_fail();
        goto out;
    }
    uint64_t first = index >= 0 ? (uint64_t)index : 0;
    uint64_t n = index >= 0 ? 1 : (uint64_t)count;
    if (first >= m->count) {
        stk_error(STK_ERR_INVALID_ARG, "%s: --index %" PRIu64 " is past its %" PRIu64 " records",
                  pos[0], first, m->count);
        rc = stk_cli_fail();
        goto out;
    }
    if (first + n > m->count) n = m->count - first;
    cells = calloc(n, sizeof *cells);
    cw = calloc(n, sizeof *cw);
    chh = calloc(n, sizeof *chh);
    if (!cells || !cw || !chh) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        rc = stk_cli_fail();
        goto out;
    }
    int c = m->channels, max_w = 1, max_h = 1;
    for (uint64_t i = 0; i < n; i++) {
        stk_record r;
        if (stk_dataset_get(ds, first + i, &r, true) != STK_OK) {
            rc = stk_cli_fail();
            goto out;
        }
        int ow, oh;
        if (stk_augment_output_size(a, r.width, r.height, &ow, &oh) != STK_OK) {
            stk_error_prefix(STK_ERR_INVALID_ARG, "record %" PRIu64, first + i);
            rc = stk_cli_fail();
            goto out;
        }
        size_t cap = (size_t)ow * (size_t)oh * (size_t)c;
        cells[i] = malloc(cap);
        if (!cells[i]) {
            stk_error(STK_ERR_NOMEM, "out of memory");
            rc = stk_cli_fail();
            goto out;
        }
        stk_sample s = {r.encoding, r.payload, r.payload_len, r.width, r.height, r.channels};
        stk_augment_out dst = {cells[i], (size_t)ow * (size_t)c, cap, 0, 0, 0};
        if (stk_augment_apply(a, &s, (uint64_t)epoch, first + i, &dst) != STK_OK) {
            stk_error_prefix(STK_ERR_CORRUPT, "record %" PRIu64 " (%.*s)", first + i,
                             (int)r.name_len, r.name);
            rc = stk_cli_fail();
            goto out;
        }
        cw[i] = dst.width, chh[i] = dst.height;
        if (dst.width > max_w) max_w = dst.width;
        if (dst.height > max_h) max_h = dst.height;
        printf("%" PRIu64 "\t%d\t%s\t%.*s\n", first + i, r.label,
               (uint32_t)r.label < m->num_classes ? m->class_names[r.label] : "?", (int)r.name_len,
               r.name);
    }
    int cols = index >= 0 ? 1 : (int)ceil(sqrt((double)n));
    int rows = (int)((n + (uint64_t)cols - 1) / (uint64_t)cols);
    int border = index >= 0 ? 0 : BORDER;
    int gw = cols * max_w + (cols + 1) * border, gh = rows * max_h + (rows + 1) * border;
    if (index >= 0) gw = cw[0], gh = chh[0];
    grid = malloc((size_t)gw * (size_t)gh * (size_t)c);
    if (!grid) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        rc = stk_cli_fail();
        goto out;
    }
    memset(grid, 64, (size_t)gw * (size_t)gh * (size_t)c); /* dark grey borders */
    for (uint64_t i = 0; i < n; i++) {
        int gx = border + (int)(i % (uint64_t)cols) * (max_w + border);
        int gy = border + (int)(i / (uint64_t)cols) * (max_h + border);
        for (int y = 0; y < chh[i]; y++)
            memcpy(grid + ((size_t)(gy + y) * (size_t)gw + (size_t)gx) * (size_t)c,
                   cells[i] + (size_t)y * (size_t)cw[i] * (size_t)c, (size_t)cw[i] * (size_t)c);
    }
    if (stk_image_write(out_path, grid, gw, gh, c, 95) != STK_OK) {
        rc = stk_cli_fail();
        goto out;
    }
    fprintf(stderr, "stoke: wrote %s (%dx%d, %" PRIu64 " sample%s, transform %s)\n", out_path, gw,
            gh, n, n > 1 ? "s" : "", spec);
    rc = STK_EXIT_OK;
out:
    for (uint64_t i = 0; cells && i < n; i++) free(cells[i]);
    free(cells);
    free(cw);
    free(chh);
    free(grid);
    stk_augment_destroy(a);
    stk_dataset_close(ds);
    return rc;
}

const stk_command stk_cmd_peek = {"peek", "write transformed samples as an image, to look at them",
                                  &cli, peek_main};
