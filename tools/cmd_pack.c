/* stoke pack: read a source, prepare its images, write one .stoke file. */
#include "augment/jpeg_prepare.h"
#include "common/text.h"
#include "common/log.h"
#include "common/thread_pool.h"
#include "storage/pack.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct pack_args {
    int from, split; /* indexes in from_names, split_names; -1: not given */
    const char *classes;
    int64_t workers, seed, max_pixels, max_side, quality;
    bool shuffle, skip_bad, no_validate, json;
} pack_args;

static const char *const from_names[] = {"imagefolder", "list", "idx", "cifar10", NULL};
static const char *const split_names[] = {"train", "test", NULL};

#define T pack_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_CHOICE(T, from, "from", "KIND", from_names, "imagefolder | list | idx | cifar10"),
    STK_FLAG_CHOICE(T, split, "split", "S", split_names,
                    "train | test: which IDX / CIFAR-10 files (default train)"),
    STK_FLAG_TEXT(T, classes, "classes", "FILE", "class names, one per line (list, idx, cifar10)"),
    STK_FLAG_WORKERS(T, workers, "threads decoding and transcoding (default: number of cores)"),
    STK_FLAG_BOOL(T, shuffle, "shuffle", "store records in a shuffled order (labels stay right)"),
    STK_FLAG_SEED(T, seed, "seed for --shuffle (default 0)"),
    STK_FLAG_BOOL(T, skip_bad, "skip-bad",
                  "skip bad inputs, list them in OUT.skipped.txt (default: stop at\n"
                  "the first with its file name and reason, and write nothing)"),
    STK_FLAG_BOOL(T, no_validate, "no-validate",
                  "do not decode every JPEG (faster; no mean/std in the meta)"),
    STK_FLAG_INT(T, max_pixels, "max-pixels", "N", 1, INT64_MAX,
                 "refuse images over N pixels, e.g. decompression bombs (default 64000000)"),
    STK_FLAG_INT(T, max_side, "max-side", "N", 1, 65500,
                 "re-encode images whose longer side exceeds N to fit N"),
    STK_FLAG_INT(T, quality, "quality", "Q", 1, 100,
                 "JPEG quality for re-encoded images, 1..100 (default 90)"),
    STK_FLAG_JSON(T, json, "print the summary as one JSON object on stdout"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "pack",
    .usage = "stoke pack [OPTIONS] SRC OUT.stoke\nstoke pack --from idx IMAGES LABELS OUT.stoke",
    .about =
        "Pack an image dataset into one Stoke dataset file (LMDB). The file is written\n"
        "to a temporary next to OUT and renamed into place at the end: OUT is complete\n"
        "or absent, whatever happens (bad input, full disk, Ctrl-C, kill -9).\n"
        "\n"
        "sources (--from; guessed from SRC when omitted):\n"
        "  imagefolder  SRC/<class>/**/*.jpg; classes = sorted folder names (default for a "
        "folder)\n"
        "  list         a text file of \"path label\" lines, paths relative to it (default for a "
        "file)\n"
        "  idx          MNIST/Fashion-MNIST IDX files, gzipped or not: a folder holding\n"
        "               train-/t10k-images-idx3-ubyte[.gz] and their labels, or IMAGES LABELS\n"
        "  cifar10      the CIFAR-10 binary batches: a folder with data_batch_*.bin, or one .bin\n"
        "IDX and CIFAR-10 are stored as raw u8 pixels; imagefolder and list as JPEG.\n"
        "Limits every reader shares: labels 0..999999 (1,000,000 classes), image sides\n"
        "up to 65535; inputs past them are refused, naming the line or file.\n"
        "\n"
        "JPEG handling: baseline files are stored byte for byte; progressive ones are\n"
        "transcoded losslessly to baseline; CMYK/YCCK are converted to RGB and\n"
        "re-encoded. Every JPEG is decoded once completely so damaged files are found now,\n"
        "not in the middle of training.\n",
    .flags = flags,
    .notes = "The output is byte-identical for the same inputs and flags, whatever --workers is.\n"
             "\n"
             "examples:\n"
             "  stoke pack --from idx --split train /usr/share/datasets/fashion-mnist "
             "fmnist-train.stoke\n"
             "  stoke pack --workers 8 --max-side 512 photos/ photos.stoke\n",
    .min_args = 2,
    .max_args = 3,
    .args_error = "expected SRC OUT.stoke (or IMAGES LABELS OUT.stoke for idx)"};

static const char *action_names[STK_PACK_ACTIONS] = {"stored", "transcoded", "converted",
                                                     "resized"};

typedef struct jpeg_hook {
    stk_jpeg_preparer **workers;
    int n;
} jpeg_hook;

static stk_status prepare_jpeg(void *ctx, int worker, const uint8_t *in, size_t len,
                               stk_pack_item *out)
{
    jpeg_hook *h = ctx;
    stk_jpeg_prepared r;
    stk_status st = stk_jpeg_prepare(h->workers[worker], in, len, &r);
    if (st) return st;
    *out = (stk_pack_item){.action = (int)r.action,
                           .data = r.data,
                           .len = r.len,
                           .width = r.width,
                           .height = r.height,
                           .channels = r.channels,
                           .has_stats = r.has_stats,
                           .pixels = r.stats.pixels};
    for (int c = 0; c < 3; c++) {
        out->sum[c] = r.stats.sum[c];
        out->sumsq[c] = r.stats.sumsq[c];
    }
    return STK_OK;
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool dir_has(const char *dir, const char *name)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (stat(p, &sb) == 0) return true;
    snprintf(p, sizeof p, "%s/%s.gz", dir, name);
    return stat(p, &sb) == 0;
}

static const char *guess_kind(const char *src, int npos)
{
    if (npos == 3) return "idx";
    if (!is_dir(src)) return "list";
    if (dir_has(src, "train-images-idx3-ubyte") || dir_has(src, "t10k-images-idx3-ubyte"))
        return "idx";
    if (dir_has(src, "data_batch_1.bin") || dir_has(src, "test_batch.bin")) return "cifar10";
    return "imagefolder";
}

static int run(int argc, char **argv)
{
    pack_args a = {
        .from = -1, .split = -1, .workers = stk_cpu_count(), .max_pixels = 64000000, .quality = 90};
    char **pos;
    int npos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &npos);
    if (parsed >= 0) return parsed;
    const char *from = a.from >= 0 ? from_names[a.from] : NULL;
    const char *split = a.split >= 0 ? split_names[a.split] : NULL, *classes = a.classes;
    int64_t workers = a.workers, seed = a.seed, max_pixels = a.max_pixels, max_side = a.max_side,
            quality = a.quality;
    bool shuffle = a.shuffle, skip_bad = a.skip_bad, validate = !a.no_validate, json = a.json;
    const char *src_path = pos[0], *out_path = pos[npos - 1];
    const char *labels = npos == 3 ? pos[1] : NULL;
    if (!from) from = guess_kind(src_path, npos);
    if (npos == 3 && strcmp(from, "idx") != 0)
        return stk_cli_usage("pack", "three paths are only for --from idx (IMAGES LABELS OUT)");
    if (is_dir(out_path))
        return stk_cli_usage("pack", "%s: OUT is a folder; give a file name", out_path);

    stk_source *src = NULL;
    stk_status st;
    if (strcmp(from, "imagefolder") == 0)
        st = stk_source_open_folder(src_path, &src);
    else if (strcmp(from, "list") == 0)
        st = stk_source_open_list(src_path, &src);
    else if (strcmp(from, "idx") == 0)
        st = stk_source_open_idx(src_path, labels, split, &src);
    else if (strcmp(from, "cifar10") == 0)
        st = stk_source_open_cifar10(src_path, split, &src);
    else
        return stk_cli_usage("pack", "--from %s: expected imagefolder, list, idx or cifar10", from);
    if (!st && classes) {
        if (strcmp(from, "imagefolder") == 0) {
            stk_source_destroy(src);
            return stk_cli_usage(
                "pack", "--classes does not apply to imagefolder (folder names are the classes)");
        }
        st = stk_source_load_class_names(src, classes);
    }
    if (st) {
        stk_source_destroy(src);
        return stk_cli_fail();
    }
    if (shuffle) stk_source_shuffle(src, (uint64_t)seed);

    /* Recorded in the meta: what shaped the content (not --workers, which does not). */
    char packed_with[512];
    int n =
        snprintf(packed_with, sizeof packed_with, "stoke %s pack --from %s", STOKE_VERSION, from);
    if (split) n += snprintf(packed_with + n, sizeof packed_with - (size_t)n, " --split %s", split);
    if (shuffle)
        n += snprintf(packed_with + n, sizeof packed_with - (size_t)n, " --shuffle --seed %lld",
                      (long long)seed);
    if (skip_bad) n += snprintf(packed_with + n, sizeof packed_with - (size_t)n, " --skip-bad");
    if (src->encoding == STK_ENCODING_JPEG) {
        if (!validate)
            n += snprintf(packed_with + n, sizeof packed_with - (size_t)n, " --no-validate");
        if (max_side)
            n += snprintf(packed_with + n, sizeof packed_with - (size_t)n,
                          " --max-side %lld --quality %lld", (long long)max_side,
                          (long long)quality);
        snprintf(packed_with + n, sizeof packed_with - (size_t)n, " --max-pixels %lld",
                 (long long)max_pixels);
    }

    jpeg_hook hook = {0};
    char *skipped_path = stk_text_printf("%s.skipped.txt", out_path);
    if (!skipped_path) {
        fprintf(stderr, "stoke: out of memory\n");
        stk_source_destroy(src);
        return STK_EXIT_ERROR;
    }
    stk_pack_options o = {.workers = (int)workers,
                          .skip_bad = skip_bad,
                          .skipped_path = skipped_path,
                          .prepare_jpeg = prepare_jpeg,
                          .prepare_ctx = &hook,
                          .cancel = &stk_cli_interrupted,
                          .progress = stderr,
                          .packed_with = packed_with};
    stk_pack_summary sum;
    int rc = STK_EXIT_OK;
    if (src->encoding == STK_ENCODING_JPEG) {
        hook.workers = calloc((size_t)workers, sizeof *hook.workers);
        stk_jpeg_prepare_options jo = {.max_pixels = (uint64_t)max_pixels,
                                       .max_side = (uint32_t)max_side,
                                       .quality = (int)quality,
                                       .validate = validate};
        st = hook.workers ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
        for (int i = 0; i < workers && !st; i++, hook.n++)
            st = stk_jpeg_preparer_create(&jo, &hook.workers[i]);
        if (st) {
            rc = stk_cli_fail();
            goto out;
        }
    }
    stk_cli_catch_interrupt();
    if (stk_pack_run(src, out_path, &o, &sum) != STK_OK) {
        rc = stk_cli_fail();
        goto out;
    }
    double rate = sum.seconds > 0 ? (double)sum.records / sum.seconds : 0;
    if (json) {
        printf("{\"records\": %llu, \"classes\": %u, \"skipped\": %llu, \"bytes_in\": %llu, "
               "\"bytes_out\": %llu, \"seconds\": %.3f, \"images_per_sec\": %.1f",
               (unsigned long long)sum.records, sum.classes, (unsigned long long)sum.skipped,
               (unsigned long long)sum.bytes_in, (unsigned long long)sum.bytes_out, sum.seconds,
               rate);
        if (src->encoding == STK_ENCODING_JPEG)
            for (int i = 0; i < STK_PACK_ACTIONS; i++)
                printf(", \"%s\": %llu", action_names[i], (unsigned long long)sum.actions[i]);
        printf("}\n");
    } else {
        char in[32], outb[32];
        printf("packed %llu records (%u classes) into %s\n", (unsigned long long)sum.records,
               sum.classes, out_path);
        printf("  in %s, out %s, %.2f s, %.0f images/s\n",
               stk_cli_bytes(sum.bytes_in, in, sizeof in),
               stk_cli_bytes(sum.bytes_out, outb, sizeof outb), sum.seconds, rate);
        if (src->encoding == STK_ENCODING_JPEG)
            printf("  JPEG: %llu stored as is, %llu transcoded to baseline, %llu converted from "
                   "CMYK, %llu resized\n",
                   (unsigned long long)sum.actions[0], (unsigned long long)sum.actions[1],
                   (unsigned long long)sum.actions[2], (unsigned long long)sum.actions[3]);
        if (sum.skipped)
            printf("  skipped %llu bad inputs, listed in %s\n", (unsigned long long)sum.skipped,
                   skipped_path);
    }
out:
    for (int i = 0; i < hook.n; i++) stk_jpeg_preparer_destroy(hook.workers[i]);
    free(hook.workers);
    free(skipped_path);
    stk_source_destroy(src);
    return rc;
}

const stk_command stk_cmd_pack = {"pack", "pack an image dataset into one .stoke file", &cli, run};
