/* stoke pack: read a source, prepare its images, write one .stoke file. */
#include "augment/jpeg_prepare.h"
#include "common/text.h"
#include "common/log.h"
#include "common/thread_pool.h"
#include "storage/pack.h"
#include "tools/cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char help[] =
    "usage: stoke pack [OPTIONS] SRC OUT.stoke\n"
    "       stoke pack --from idx IMAGES LABELS OUT.stoke\n"
    "\n"
    "Pack an image dataset into one Stoke dataset file (LMDB). The file is written\n"
    "to a temporary next to OUT and renamed into place at the end: OUT is complete\n"
    "or absent, whatever happens (bad input, full disk, Ctrl-C, kill -9).\n"
    "\n"
    "sources (--from; guessed from SRC when omitted):\n"
    "  imagefolder  SRC/<class>/**/*.jpg; classes = sorted folder names (default for a folder)\n"
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
    "not in the middle of training.\n"
    "\n"
    "options:\n"
    "  --from KIND        imagefolder | list | idx | cifar10\n"
    "  --split S          train | test: which IDX / CIFAR-10 files (default train)\n"
    "  --classes FILE     class names, one per line (list, idx, cifar10)\n"
    "  --workers N        threads decoding and transcoding (default: number of cores)\n"
    "  --shuffle          store records in a shuffled order (labels stay right)\n"
    "  --seed S           seed for --shuffle (default 0)\n"
    "  --skip-bad         skip bad inputs, list them in OUT.skipped.txt (default: stop at\n"
    "                     the first with its file name and reason, and write nothing)\n"
    "  --no-validate      do not decode every JPEG (faster; no mean/std in the meta)\n"
    "  --max-pixels N     refuse images over N pixels, e.g. decompression bombs (default "
    "64000000)\n"
    "  --max-side N       re-encode images whose longer side exceeds N to fit N\n"
    "  --quality Q        JPEG quality for re-encoded images, 1..100 (default 90)\n"
    "  --json             print the summary as one JSON object on stdout\n"
    "  -h, --help         this text\n"
    "\n"
    "The output is byte-identical for the same inputs and flags, whatever --workers is.\n"
    "\n"
    "examples:\n"
    "  stoke pack --from idx --split train /usr/share/datasets/fashion-mnist fmnist-train.stoke\n"
    "  stoke pack --workers 8 --max-side 512 photos/ photos.stoke\n";

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
    enum {
        O_FROM = 256,
        O_SPLIT,
        O_CLASSES,
        O_WORKERS,
        O_SHUFFLE,
        O_SEED,
        O_SKIP,
        O_NOVAL,
        O_MAXPIX,
        O_MAXSIDE,
        O_QUALITY,
        O_JSON
    };
    static const struct option longopts[] = {{"from", required_argument, 0, O_FROM},
                                             {"split", required_argument, 0, O_SPLIT},
                                             {"classes", required_argument, 0, O_CLASSES},
                                             {"workers", required_argument, 0, O_WORKERS},
                                             {"shuffle", no_argument, 0, O_SHUFFLE},
                                             {"seed", required_argument, 0, O_SEED},
                                             {"skip-bad", no_argument, 0, O_SKIP},
                                             {"no-validate", no_argument, 0, O_NOVAL},
                                             {"max-pixels", required_argument, 0, O_MAXPIX},
                                             {"max-side", required_argument, 0, O_MAXSIDE},
                                             {"quality", required_argument, 0, O_QUALITY},
                                             {"json", no_argument, 0, O_JSON},
                                             {0, 0, 0, 0}};
    const char *from = NULL, *split = NULL, *classes = NULL;
    int64_t workers = stk_cpu_count(), seed = 0, max_pixels = 64000000, max_side = 0, quality = 90;
    bool shuffle = false, skip_bad = false, validate = true, json = false;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case O_FROM: from = optarg; break;
        case O_SPLIT: split = optarg; break;
        case O_CLASSES: classes = optarg; break;
        case O_WORKERS:
            if (!stk_cli_int("pack", "--workers", optarg, 1, 1024, &workers)) return STK_EXIT_USAGE;
            break;
        case O_SHUFFLE: shuffle = true; break;
        case O_SEED:
            if (!stk_cli_int("pack", "--seed", optarg, 0, INT64_MAX, &seed)) return STK_EXIT_USAGE;
            break;
        case O_SKIP: skip_bad = true; break;
        case O_NOVAL: validate = false; break;
        case O_MAXPIX:
            if (!stk_cli_int("pack", "--max-pixels", optarg, 1, INT64_MAX, &max_pixels))
                return STK_EXIT_USAGE;
            break;
        case O_MAXSIDE:
            if (!stk_cli_int("pack", "--max-side", optarg, 1, 65500, &max_side))
                return STK_EXIT_USAGE;
            break;
        case O_QUALITY:
            if (!stk_cli_int("pack", "--quality", optarg, 1, 100, &quality)) return STK_EXIT_USAGE;
            break;
        case O_JSON: json = true; break;
        default: return stk_cli_usage("pack", "unknown option '%s'", argv[optind - 1]);
        }
    }
    int npos = argc - optind;
    if (npos < 2 || npos > 3)
        return stk_cli_usage("pack", "expected SRC OUT.stoke (or IMAGES LABELS OUT.stoke for idx)");
    const char *src_path = argv[optind], *out_path = argv[argc - 1];
    const char *labels = npos == 3 ? argv[optind + 1] : NULL;
    if (!from) from = guess_kind(src_path, npos);
    if (npos == 3 && strcmp(from, "idx") != 0)
        return stk_cli_usage("pack", "three paths are only for --from idx (IMAGES LABELS OUT)");
    if (split && strcmp(split, "train") != 0 && strcmp(split, "test") != 0)
        return stk_cli_usage("pack", "--split %s: expected train or test", split);
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

const stk_command stk_cmd_pack = {"pack", "pack an image dataset into one .stoke file", help, run};
