/* stoke peek: look at what the model will see. */
#include "augment/augment.h"
#include "common/json.h"
#include "common/rng.h"
#include "loader/loader.h"
#include "runlog/image_text.h"
#include "storage/dataset.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/image_write.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct peek_args {
    const char *transform, *out;
    int64_t index, count, seed, epoch;
    bool json;
} peek_args;

#define T peek_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "the transform (default: the training default for the dataset:\n"
                  "rrc:224,flip for JPEG, pad:4,crop:SIZE,flip for raw images);\n"
                  "none = the stored image as decoded; the tokens: stoke help\n"
                  "transforms"),
    STK_FLAG_INT(T, index, "index", "I", 0, INT64_MAX,
                 "only sample I, at its exact size, no border (compare pixel for\n"
                 "pixel with other tools)"),
    STK_FLAG_INT(T, count, "count", "N", 1, 4096,
                 "N samples in a grid, drawn across the classes (every class once\n"
                 "before any twice), sorted by class, each labelled with its class\n"
                 "(default 16; every record when the dataset has N or fewer)"),
    STK_FLAG_SEED(T, seed, "which samples --count draws, and the augmentation (default 0)"),
    STK_FLAG_INT(T, epoch, "epoch", "E", 0, INT64_MAX,
                 "epoch (default 0): another epoch gives other random crops"),
    STK_FLAG_TEXT(T, out, "out", "FILE", ".png, .ppm/.pgm (lossless) or .jpg (default peek.ppm)",
                  .letter = 'o'),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout instead of the label lines: out, width,\n"
                  "height, transform, samples [{index, label, class, source}]"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "peek",
    .usage = "stoke peek [OPTIONS] DATA.stoke",
    .about = "Write transformed samples as one grid image, to see what a model is fed; the\n"
             "labels are printed on stdout (index, label, class, source name) and under\n"
             "each cell of the grid.\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected one DATA.stoke",
    .first_arg_names = (const char *const[]){"data", NULL}};

#define BORDER 2

typedef struct pick {
    uint64_t index;
    int32_t label;
} pick;

static int by_label(const void *a, const void *b)
{
    const pick *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* n records drawn at random (seeded) across the classes: a class is shown
 * again only once every class has been (or after many draws, for classes
 * too rare to find), sorted by class. Every record when n >= count. */
static stk_status pick_samples(stk_dataset *ds, uint64_t n, uint64_t seed, pick *out)
{
    const stk_meta *m = stk_dataset_meta(ds);
    uint64_t count = m->count;
    stk_record r;
    if (n >= count) {
        for (uint64_t i = 0; i < count; i++) {
            STK_TRY(stk_dataset_get(ds, i, &r, false));
            out[i] = (pick){i, r.label};
        }
        return STK_OK;
    }
    uint8_t *taken = calloc(count / 8 + 1, 1), *shown = calloc(m->num_classes + 1, 1);
    stk_status st = taken && shown ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    uint32_t classes = 0, left;
    for (uint32_t c = 0; c < m->num_classes; c++) classes += m->class_counts[c] > 0;
    left = classes;
    stk_rng rng;
    stk_rng_init(&rng, seed, 0x5045454B /* "PEEK" */, 0);
    uint64_t got = 0, patience = 64 * n + 1024;
    for (uint64_t tries = 0; st == STK_OK && got < n; tries++) {
        uint64_t i = stk_rng_below64(&rng, count);
        if (taken[i / 8] & (1u << (i % 8))) continue;
        if ((st = stk_dataset_get(ds, i, &r, false)) != STK_OK) break;
        if (shown[r.label] && tries < patience) continue;
        taken[i / 8] |= (uint8_t)(1u << (i % 8));
        out[got++] = (pick){i, r.label};
        if (!shown[r.label]) shown[r.label] = 1, left--;
        if (left == 0) memset(shown, 0, m->num_classes), left = classes; /* the next round */
    }
    free(taken);
    free(shown);
    if (st == STK_OK) qsort(out, n, sizeof *out, by_label);
    return st;
}

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
        return stk_cli_usage("peek", "--out %s: write .png, .ppm/.pgm (lossless) or .jpg",
                             out_path);
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
    pick *picks = NULL;
    stk_augment *a = NULL;
    char *samples = NULL; /* --json: the samples' objects, printed once the grid is written */
    size_t samples_len = 0;
    FILE *js = pa.json ? open_memstream(&samples, &samples_len) : NULL;
    if (pa.json && !js) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        rc = stk_cli_fail();
        goto out;
    }
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
    if (stk_augment_output_size(a, m->max_width, m->max_height, &big_w, &big_h) == STK_OK &&
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
    picks = calloc(n, sizeof *picks);
    if (!cells || !cw || !chh || !picks) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        rc = stk_cli_fail();
        goto out;
    }
    if (index >= 0)
        picks[0].index = first;
    else if (pick_samples(ds, n, (uint64_t)seed, picks) != STK_OK) {
        rc = stk_cli_fail();
        goto out;
    }
    int c = m->channels, max_w = 1, max_h = 1;
    for (uint64_t i = 0; i < n; i++) {
        stk_record r;
        uint64_t at = picks[i].index;
        if (stk_dataset_get(ds, at, &r, true) != STK_OK) {
            rc = stk_cli_fail();
            goto out;
        }
        int ow, oh;
        if (stk_augment_output_size(a, r.width, r.height, &ow, &oh) != STK_OK) {
            stk_error_prefix(STK_ERR_INVALID_ARG, "record %" PRIu64, at);
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
        if (stk_augment_apply(a, &s, (uint64_t)epoch, at, &dst) != STK_OK) {
            stk_error_prefix(STK_ERR_CORRUPT, "record %" PRIu64 " (%.*s)", at, (int)r.name_len,
                             r.name);
            rc = stk_cli_fail();
            goto out;
        }
        cw[i] = dst.width, chh[i] = dst.height;
        if (dst.width > max_w) max_w = dst.width;
        if (dst.height > max_h) max_h = dst.height;
        picks[i].label = r.label;
        const char *class_name = (uint32_t)r.label < m->num_classes ? m->class_names[r.label] : "?";
        if (js) {
            char source[4096];
            snprintf(source, sizeof source, "%.*s", (int)r.name_len, r.name);
            fprintf(js, "%s{\"index\": %" PRIu64 ", \"label\": %d, \"class\": ", i ? ", " : "", at,
                    r.label);
            stk_json_write_string(js, class_name);
            fputs(", \"source\": ", js);
            stk_json_write_string(js, source);
            fputc('}', js);
        } else {
            printf("%" PRIu64 "\t%d\t%s\t%.*s\n", at, r.label, class_name, (int)r.name_len, r.name);
        }
    }
    int cols = index >= 0 ? 1 : (int)ceil(sqrt((double)n));
    int rows = (int)((n + (uint64_t)cols - 1) / (uint64_t)cols);
    int border = index >= 0 ? 0 : BORDER;
    /* a strip under each cell for its label: "LABEL CLASS", cut to the cell */
    int scale = max_w / 96 > 1 ? max_w / 96 : 1;
    int strip = index >= 0 ? 0 : STK_TEXT_CELL_H * scale + 1;
    int cell_h = max_h + strip;
    int gw = cols * max_w + (cols + 1) * border, gh = rows * cell_h + (rows + 1) * border;
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
        int gy = border + (int)(i / (uint64_t)cols) * (cell_h + border);
        for (int y = 0; y < chh[i]; y++)
            memcpy(grid + ((size_t)(gy + y) * (size_t)gw + (size_t)gx) * (size_t)c,
                   cells[i] + (size_t)y * (size_t)cw[i] * (size_t)c, (size_t)cw[i] * (size_t)c);
        if (!strip) continue;
        char text[160];
        int32_t lab = picks[i].label;
        snprintf(text, sizeof text, "%d %s", lab,
                 (uint32_t)lab < m->num_classes ? m->class_names[lab] : "?");
        size_t fit = (size_t)(max_w / (STK_TEXT_CELL_W * scale));
        if (strlen(text) > fit) text[fit] = '\0';
        stk_image_draw_text(grid, gw, gh, c, gx + 1, gy + max_h + 1, scale, text, 255);
    }
    if (stk_image_write(out_path, grid, gw, gh, c, 95) != STK_OK) {
        rc = stk_cli_fail();
        goto out;
    }
    fprintf(stderr, "stoke: wrote %s (%dx%d, %" PRIu64 " sample%s, transform %s)\n", out_path, gw,
            gh, n, n > 1 ? "s" : "", spec);
    if (js) {
        fclose(js);
        js = NULL;
        fputs("{\"out\": ", stdout);
        stk_json_write_string(stdout, out_path);
        printf(", \"width\": %d, \"height\": %d, \"transform\": ", gw, gh);
        stk_json_write_string(stdout, spec);
        printf(", \"samples\": [%s]}\n", samples ? samples : "");
    }
    rc = STK_EXIT_OK;
out:
    if (js) fclose(js);
    free(samples);
    for (uint64_t i = 0; cells && i < n; i++) free(cells[i]);
    free(cells);
    free(cw);
    free(chh);
    free(picks);
    free(grid);
    stk_augment_destroy(a);
    stk_dataset_close(ds);
    return rc;
}

const stk_command stk_cmd_peek = {"peek", "write transformed samples as an image, to look at them",
                                  &cli, peek_main};
