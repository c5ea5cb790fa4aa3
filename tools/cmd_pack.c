/* stoke pack: read a source, prepare its images, write one .stoke file. */
#include "common/json.h"
#include "common/thread_pool.h"
#include "pack/pack_job.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct pack_args {
    int from, split, store; /* indexes in from_names, split_names, store_names; -1: not given */
    const char *classes, *shard_size;
    int64_t workers, seed, max_pixels, max_side, quality, restart;
    bool shuffle, skip_bad, no_validate, json;
} pack_args;

static const char *const from_names[] = {"imagefolder", "list", "idx", "cifar10", NULL};
static const char *const split_names[] = {"train", "val", "test", NULL};
static const char *const store_names[] = {"jpeg", "raw", NULL};

#define T pack_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_CHOICE(T, from, "from", "KIND", from_names, "imagefolder | list | idx | cifar10"),
    STK_FLAG_CHOICE(T, split, "split", "S", split_names,
                    "train | test: which IDX / CIFAR-10 files (default train); for a\n"
                    "folder of train/ val/ (or valid/, validation/) test/ folders:\n"
                    "which one to pack (train | val | test; required there)"),
    STK_FLAG_TEXT(T, classes, "classes", "FILE", "class names, one per line (list, idx, cifar10)"),
    STK_FLAG_WORKERS(T, workers, "threads decoding and transcoding (default: number of cores)"),
    STK_FLAG_BOOL(T, shuffle, "shuffle", "store records in a shuffled order (labels stay right)"),
    STK_FLAG_SEED(T, seed, "seed for --shuffle (default 0)"),
    STK_FLAG_BOOL(T, skip_bad, "skip-bad",
                  "skip bad inputs, list them in OUT.skipped.txt (default: stop at\n"
                  "the first with its file name and reason, and write nothing)"),
    STK_FLAG_BOOL(T, no_validate, "no-validate",
                  "do not decode every JPEG (faster; no mean/std in the meta)"),
    STK_FLAG_CHOICE(T, store, "store", "HOW", store_names,
                    "how a folder's or list's images are stored: jpeg (default; JPEG\n"
                    "files kept, others encoded at --quality) or raw (every image\n"
                    "decoded to RGB pixels: lossless, for PNG or synthetic data where\n"
                    "JPEG's loss matters; larger files, no decode when loading)"),
    STK_FLAG_INT(T, max_pixels, "max-pixels", "N", 1, INT64_MAX,
                 "refuse images over N pixels, e.g. decompression bombs (default 64000000)"),
    STK_FLAG_INT(T, max_side, "max-side", "N", 1, 65500,
                 "re-encode images whose longer side exceeds N to fit N"),
    STK_FLAG_INT(T, quality, "quality", "Q", 1, 100,
                 "JPEG quality for re-encoded images (CMYK, --max-side, and PNG/\n"
                 "WebP/BMP/PPM files), 1..100 (default 90)"),
    STK_FLAG_INT(T, restart, "restart", "N", 0, 64,
                 "write JPEGs with restart markers about every N MCUs, so that a\n"
                 "crop decodes only the segments it covers (lossless; default 4;\n"
                 "0: store baseline files byte for byte)"),
    STK_FLAG_TEXT(T, shard_size, "shard-size", "SIZE",
                  "write shards of about SIZE bytes each (K, M, G, T suffixes:\n"
                  "powers of 1024; at least 1M): OUT-00000-of-000NN.stoke ... and\n"
                  "OUT.shards, the list that opens them as one dataset (--data OUT.shards,\n"
                  "or a comma-separated list of shard files)"),
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
        "IDX and CIFAR-10 are stored as raw u8 pixels; imagefolder and list as JPEG,\n"
        "or with --store raw as their decoded RGB pixels (lossless).\n"
        "Limits every reader shares: labels 0..999999 (1,000,000 classes), image sides\n"
        "up to 65535; inputs past them are refused, naming the line or file.\n"
        "\n"
        "JPEG handling: baseline files are stored byte for byte; progressive ones are\n"
        "transcoded losslessly to baseline; CMYK/YCCK are converted to RGB and\n"
        "re-encoded. Every JPEG is decoded once completely so damaged files are found now,\n"
        "not in the middle of training. PNG (any colour type, 16-bit, interlaced), WebP,\n"
        "BMP and binary PPM/PGM files (told by their bytes) are decoded as PIL's\n"
        "convert(\"RGB\") does and stored as JPEG at --quality: 4-5x smaller than PNG and\n"
        "5x faster to load, at 38 dB (q90) to 41 dB (q95) on photos (README, Formats).\n"
        "GIF and TIFF are refused, naming the formats read.\n",
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

/* OUT without its ".stoke": the shards' and the list's stem. */
static size_t stem_len(const char *out)
{
    size_t n = strlen(out);
    return n > 6 && !strcmp(out + n - 6, ".stoke") ? n - 6 : n;
}

/* "512M", "2G", "1048576": bytes; -1 if not a size in 1 MiB .. 1 TiB. */
static int64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0)) return -1;
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (*end && (!u || (end[1] && strcmp(end + 1, "B") && strcmp(end + 1, "iB")))) return -1;
    for (const char *p = units; u && p <= u; p++) v *= 1024;
    if (v < 1024.0 * 1024 || v > 1024.0 * 1024 * 1024 * 1024) return -1;
    return (int64_t)v;
}

static int pack_main(int argc, char **argv)
{
    pack_args a = {.from = -1,
                   .split = -1,
                   .store = -1,
                   .workers = stk_cpu_count(),
                   .max_pixels = 64000000,
                   .quality = 90,
                   .restart = STK_PACK_DEFAULT_RESTART};
    char **pos;
    int npos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &npos);
    if (parsed >= 0) return parsed;
    stk_pack_request r = stk_pack_request_defaults();
    r.src = pos[0];
    r.out = pos[npos - 1];
    r.labels = npos == 3 ? pos[1] : NULL;
    r.from = a.from >= 0 ? from_names[a.from] : stk_pack_guess_kind(r.src, npos == 3);
    r.split = a.split >= 0 ? split_names[a.split] : NULL;
    r.store = a.store >= 0 ? store_names[a.store] : NULL;
    r.classes = a.classes;
    r.workers = (int)a.workers;
    r.shuffle = a.shuffle;
    r.seed = (uint64_t)a.seed;
    r.skip_bad = a.skip_bad;
    r.validate = !a.no_validate;
    r.max_pixels = (uint64_t)a.max_pixels;
    r.max_side = (uint32_t)a.max_side;
    r.quality = (int)a.quality;
    r.restart_mcus = (int)a.restart;
    if (a.shard_size) {
        int64_t bytes = parse_size(a.shard_size);
        if (bytes < 0)
            return stk_cli_usage(
                "pack", "--shard-size %s: expected a size of 1M..1T (e.g. 512M, 2G)", a.shard_size);
        r.shard_bytes = (uint64_t)bytes;
    }
    r.cancel = &stk_cli_interrupted;
    r.progress = stderr;
    /* Wrong combinations of paths and flags are usage errors (exit 2) here. */
    if (npos == 3 && strcmp(r.from, "idx") != 0)
        return stk_cli_usage("pack", "three paths are only for --from idx (IMAGES LABELS OUT)");
    if (a.classes && strcmp(r.from, "imagefolder") == 0)
        return stk_cli_usage(
            "pack", "--classes does not apply to imagefolder (folder names are the classes)");
    bool files = !strcmp(r.from, "imagefolder") || !strcmp(r.from, "list");
    if (a.store == 0 && !files)
        return stk_cli_usage("pack", "--store jpeg: %s is stored as its raw pixels", r.from);
    if (a.store == 1 && files && a.max_side)
        return stk_cli_usage("pack", "--max-side with --store raw: raw storage keeps every "
                                     "pixel; resize before packing, or --store jpeg");
    struct stat sb;
    if (stat(r.out, &sb) == 0 && S_ISDIR(sb.st_mode))
        return stk_cli_usage("pack", "%s: OUT is a folder; give a file name", r.out);

    stk_cli_catch_interrupt();
    stk_pack_summary sum;
    stk_encoding enc;
    if (stk_pack_job_run(&r, &sum, &enc) != STK_OK) return stk_cli_fail();
    double rate = sum.seconds > 0 ? (double)sum.records / sum.seconds : 0;
    if (a.json) {
        char j[2][STK_JSON_NUMBER];
        printf("{\"records\": %llu, \"classes\": %u, \"skipped\": %llu, \"bytes_in\": %llu, "
               "\"bytes_out\": %llu, \"shards\": %d, \"seconds\": %s, \"images_per_sec\": %s",
               (unsigned long long)sum.records, sum.classes, (unsigned long long)sum.skipped,
               (unsigned long long)sum.bytes_in, (unsigned long long)sum.bytes_out, sum.shards,
               stk_json_number(sum.seconds, 3, j[0]), stk_json_number(rate, 1, j[1]));
        if (enc == STK_ENCODING_JPEG)
            for (int i = 0; i < STK_PACK_ACTIONS; i++)
                printf(", \"%s\": %llu", stk_pack_action_names[i],
                       (unsigned long long)sum.actions[i]);
        printf("}\n");
        return STK_EXIT_OK;
    }
    char in[32], outb[32];
    if (sum.shards)
        printf("packed %llu records (%u classes) into %d shards: %.*s-00000-of-%05d.stoke ..., "
               "listed in %.*s.shards\n",
               (unsigned long long)sum.records, sum.classes, sum.shards, (int)stem_len(r.out),
               r.out, sum.shards, (int)stem_len(r.out), r.out);
    else
        printf("packed %llu records (%u classes) into %s\n", (unsigned long long)sum.records,
               sum.classes, r.out);
    printf("  in %s, out %s, %.2f s, %.0f images/s\n", stk_cli_bytes(sum.bytes_in, in, sizeof in),
           stk_cli_bytes(sum.bytes_out, outb, sizeof outb), sum.seconds, rate);
    if (enc == STK_ENCODING_JPEG)
        printf("  JPEG: %llu stored as is, %llu given restart markers, %llu transcoded to "
               "baseline, %llu converted from CMYK, %llu resized, %llu encoded from PNG/WebP/"
               "BMP/PPM\n",
               (unsigned long long)sum.actions[0], (unsigned long long)sum.actions[4],
               (unsigned long long)sum.actions[1], (unsigned long long)sum.actions[2],
               (unsigned long long)sum.actions[3], (unsigned long long)sum.actions[5]);
    if (sum.skipped)
        printf("  skipped %llu bad inputs, listed in %s.skipped.txt\n",
               (unsigned long long)sum.skipped, r.out);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_pack = {"pack", "pack an image dataset into one .stoke file", &cli,
                                  pack_main};
