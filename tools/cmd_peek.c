/* stoke peek: look at what the model will see. */
#include "augment/augment.h"
#include "loader/loader.h"
#include "storage/dataset.h"
#include "tools/cli.h"
#include "tools/image_write.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: stoke peek [OPTIONS] DATA.stoke\n"
    "\n"
    "Write transformed samples as one grid image, to see what a model is fed; the\n"
    "labels are printed on stdout (index, label, class, source name).\n"
    "\n"
    "options:\n"
    "  --transform SPEC  the transform (default: the training default for the dataset:\n"
    "                    rrc:224,flip for JPEG, pad:4,crop:SIZE,flip for raw images);\n"
    "                    none = the stored image as decoded. Spec tokens:\n"
    "                      rrc:SIZE[:SMIN:SMAX]  RandomResizedCrop (scale 0.08..1, ratio "
    "3/4..4/3)\n"
    "                      resize:N              shorter side to N\n"
    "                      center:N              CenterCrop\n"
    "                      pad:P,crop:N          RandomCrop with zero padding\n"
    "                      flip[:P]              RandomHorizontalFlip (p 0.5)\n"
    "                      norm[:imagenet|:MEAN/STD]  (float outputs only; ignored here)\n"
    "  --index I         only sample I, at its exact size, no border (compare pixel for\n"
    "                    pixel with other tools)\n"
    "  --count N         samples 0..N-1 in a grid (default 16)\n"
    "  --seed S          augmentation seed (default 0)\n"
    "  --epoch E         epoch (default 0): another epoch gives other random crops\n"
    "  --out FILE        .ppm/.pgm (lossless) or .jpg (default peek.ppm)\n"
    "  -h, --help        this text\n";

#define BORDER 2

static int run(int argc, char **argv)
{
    enum { O_TRANSFORM = 256, O_INDEX, O_COUNT, O_SEED, O_EPOCH, O_OUT };
    static const struct option longopts[] = {{"transform", required_argument, 0, O_TRANSFORM},
                                             {"index", required_argument, 0, O_INDEX},
                                             {"count", required_argument, 0, O_COUNT},
                                             {"seed", required_argument, 0, O_SEED},
                                             {"epoch", required_argument, 0, O_EPOCH},
                                             {"out", required_argument, 0, O_OUT},
                                             {0, 0, 0, 0}};
    const char *spec = NULL, *out_path = "peek.ppm";
    int64_t index = -1, count = 16, seed = 0, epoch = 0;
    bool have_count = false;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case O_TRANSFORM: spec = optarg; break;
        case O_INDEX:
            if (!stk_cli_int("peek", "--index", optarg, 0, INT64_MAX, &index))
                return STK_EXIT_USAGE;
            break;
        case O_COUNT:
            if (!stk_cli_int("peek", "--count", optarg, 1, 4096, &count)) return STK_EXIT_USAGE;
            have_count = true;
            break;
        case O_SEED:
            if (!stk_cli_int("peek", "--seed", optarg, 0, INT64_MAX, &seed)) return STK_EXIT_USAGE;
            break;
        case O_EPOCH:
            if (!stk_cli_int("peek", "--epoch", optarg, 0, INT64_MAX, &epoch))
                return STK_EXIT_USAGE;
            break;
        case O_OUT: out_path = optarg; break;
        default: return stk_cli_usage("peek", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1) return stk_cli_usage("peek", "expected one DATA.stoke");
    if (index >= 0 && have_count)
        return stk_cli_usage("peek", "--index and --count do not go together");
    if (!stk_image_path_supported(out_path))
        return stk_cli_usage("peek", "--out %s: write .ppm/.pgm (lossless) or .jpg", out_path);
    stk_dataset *ds;
    if (stk_dataset_open(argv[optind], &ds) != STK_OK) return stk_cli_fail();
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
    uint64_t first = index >= 0 ? (uint64_t)index : 0;
    uint64_t n = index >= 0 ? 1 : (uint64_t)count;
    if (first >= m->count) {
        stk_error(STK_ERR_INVALID_ARG, "%s: --index %" PRIu64 " is past its %" PRIu64 " records",
                  argv[optind], first, m->count);
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
                                  help, run};
