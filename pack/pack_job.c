/* A whole pack as one call: source, JPEG preparation hook, packed_with. */
#include "pack/pack_job.h"

#include "common/text.h"
#include "pack/jpeg_prepare.h"
#include "pack/raw_prepare.h"

#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

const char *const stk_pack_action_names[STK_PACK_ACTIONS] = {"stored",  "transcoded", "converted",
                                                             "resized", "segmented",  "encoded"};

stk_pack_request stk_pack_request_defaults(void)
{
    return (stk_pack_request){.workers = 1,
                              .validate = true,
                              .max_pixels = 64000000,
                              .quality = 90,
                              .restart_mcus = STK_PACK_DEFAULT_RESTART};
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

const char *stk_pack_guess_kind(const char *src, bool with_labels)
{
    if (with_labels) return "idx";
    if (!is_dir(src)) return "list";
    if (dir_has(src, "train-images-idx3-ubyte") || dir_has(src, "t10k-images-idx3-ubyte"))
        return "idx";
    if (dir_has(src, "data_batch_1.bin") || dir_has(src, "test_batch.bin")) return "cifar10";
    return "imagefolder";
}

/* The prepare hook's state: a preparer per worker, JPEG's or raw's. */
typedef struct prepare_hook {
    stk_jpeg_preparer **jpeg;
    stk_raw_preparer **raw;
    int n;
} prepare_hook;

static stk_status prepare_jpeg(void *ctx, int worker, const uint8_t *in, size_t len,
                               stk_pack_item *out)
{
    prepare_hook *h = ctx;
    stk_jpeg_prepared r;
    stk_status st = stk_jpeg_prepare(h->jpeg[worker], in, len, &r);
    if (st != STK_OK) return st;
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

/* --store raw: the file decoded to RGB pixels. */
static stk_status prepare_raw(void *ctx, int worker, const uint8_t *in, size_t len,
                              stk_pack_item *out)
{
    prepare_hook *h = ctx;
    stk_raw_prepared r;
    STK_TRY(stk_raw_prepare(h->raw[worker], in, len, &r));
    *out = (stk_pack_item){.data = r.pixels,
                           .len = (size_t)r.width * r.height * 3,
                           .width = r.width,
                           .height = r.height,
                           .channels = 3,
                           .has_stats = true,
                           .pixels = r.stats.pixels};
    for (int c = 0; c < 3; c++) {
        out->sum[c] = r.stats.sum[c];
        out->sumsq[c] = r.stats.sumsq[c];
    }
    return STK_OK;
}

static stk_status check_request(const stk_pack_request *r, const char *from)
{
    if (!r->src || !r->out) return stk_error(STK_ERR_INVALID_ARG, "pack: a source and an output");
    if (r->workers < 1 || r->workers > 1024)
        return stk_error(STK_ERR_INVALID_ARG, "workers %d: expected an integer in 1..1024",
                         r->workers);
    if (r->seed > (uint64_t)INT64_MAX)
        return stk_error(STK_ERR_INVALID_ARG,
                         "seed %" PRIu64 ": expected an integer in 0..%" PRId64, r->seed,
                         INT64_MAX);
    if (r->quality < 1 || r->quality > 100)
        return stk_error(STK_ERR_INVALID_ARG, "quality %d: expected an integer in 1..100",
                         r->quality);
    if (r->max_side > 65500)
        return stk_error(STK_ERR_INVALID_ARG, "max_side %u: expected an integer in 1..65500",
                         r->max_side);
    if (r->max_pixels < 1 || r->max_pixels > (uint64_t)INT64_MAX)
        return stk_error(STK_ERR_INVALID_ARG,
                         "max_pixels %" PRIu64 ": expected an integer in 1..%" PRId64,
                         r->max_pixels, INT64_MAX);
    if (r->restart_mcus < 0 || r->restart_mcus > 64)
        return stk_error(STK_ERR_INVALID_ARG, "restart %d: expected an integer in 0..64",
                         r->restart_mcus);
    bool files = !strcmp(from, "imagefolder") || !strcmp(from, "list");
    if (r->store && strcmp(r->store, "jpeg") && strcmp(r->store, "raw"))
        return stk_error(STK_ERR_INVALID_ARG, "store %s: expected jpeg or raw", r->store);
    if (r->store && !strcmp(r->store, "jpeg") && !files)
        return stk_error(STK_ERR_INVALID_ARG,
                         "store jpeg: %s is stored as its raw pixels (it has no files to keep)",
                         from);
    if (r->store && !strcmp(r->store, "raw") && files && r->max_side)
        return stk_error(STK_ERR_INVALID_ARG,
                         "max_side with store raw: raw storage keeps every pixel; resize before "
                         "packing, or store jpeg");
    if (r->labels && strcmp(from, "idx") != 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "three paths are only for --from idx (IMAGES LABELS OUT)");
    if (r->split && strcmp(r->split, "train") != 0 && strcmp(r->split, "test") != 0 &&
        (strcmp(r->split, "val") != 0 || strcmp(from, "imagefolder") != 0))
        return stk_error(STK_ERR_INVALID_ARG, "split %s: expected train or test%s", r->split,
                         strcmp(from, "imagefolder") ? "" : " or val");
    if (is_dir(r->out))
        return stk_error(STK_ERR_INVALID_ARG, "%s: OUT is a folder; give a file name", r->out);
    return STK_OK;
}

static stk_status open_source(const stk_pack_request *r, const char *from, stk_source **src)
{
    stk_status st;
    if (strcmp(from, "imagefolder") == 0) {
        if (r->classes)
            return stk_error(STK_ERR_INVALID_ARG,
                             "--classes does not apply to imagefolder (folder names are the "
                             "classes)");
        st = stk_source_open_folder_split(r->src, r->split, src);
    } else if (strcmp(from, "list") == 0) {
        st = stk_source_open_list(r->src, src);
    } else if (strcmp(from, "idx") == 0) {
        st = stk_source_open_idx(r->src, r->labels, r->split, src);
    } else if (strcmp(from, "cifar10") == 0) {
        st = stk_source_open_cifar10(r->src, r->split, src);
    } else {
        return stk_error(STK_ERR_INVALID_ARG,
                         "--from %s: expected imagefolder, list, idx or cifar10", from);
    }
    if (st == STK_OK && r->classes) st = stk_source_load_class_names(*src, r->classes);
    if (st == STK_OK && r->shuffle) stk_source_shuffle(*src, r->seed);
    return st;
}

/* Recorded in the meta: what shaped the content (not --workers, which does not). */
static void describe(const stk_pack_request *r, const char *from, stk_encoding enc, char *buf,
                     size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "stoke %s pack --from %s", STOKE_VERSION, from);
#define ADD(...)                                                                                   \
    n += (size_t)snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__)
    if (r->split) ADD(" --split %s", r->split);
    if (r->shuffle) ADD(" --shuffle --seed %llu", (unsigned long long)r->seed);
    if (r->skip_bad) ADD(" --skip-bad");
    if (r->shard_bytes) ADD(" --shard-size %llu", (unsigned long long)r->shard_bytes);
    if (enc == STK_ENCODING_RAW_U8 && strcmp(from, "idx") && strcmp(from, "cifar10"))
        ADD(" --store raw --max-pixels %llu", (unsigned long long)r->max_pixels);
    if (enc == STK_ENCODING_JPEG) {
        if (!r->validate) ADD(" --no-validate");
        if (r->max_side) ADD(" --max-side %u --quality %d", r->max_side, r->quality);
        ADD(" --max-pixels %llu --restart %d", (unsigned long long)r->max_pixels, r->restart_mcus);
    }
#undef ADD
}

stk_status stk_pack_job_run(const stk_pack_request *r, stk_pack_summary *summary,
                            stk_encoding *encoding)
{
    const char *from = r->from ? r->from : stk_pack_guess_kind(r->src, r->labels != NULL);
    STK_TRY(check_request(r, from));
    stk_source *src = NULL;
    stk_status st = open_source(r, from, &src);
    if (st != STK_OK) {
        stk_source_destroy(src);
        return st;
    }
    bool raw_files = src->encoding == STK_ENCODING_JPEG && r->store && !strcmp(r->store, "raw");
    if (raw_files) { /* every file decoded, stored as RGB pixels */
        src->encoding = STK_ENCODING_RAW_U8;
        src->channels = 3;
    }
    if (encoding) *encoding = src->encoding;
    char packed_with[512];
    describe(r, from, src->encoding, packed_with, sizeof packed_with);

    prepare_hook hook = {0};
    char *skipped_path = stk_text_printf("%s.skipped.txt", r->out);
    if (!skipped_path) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (src->encoding == STK_ENCODING_JPEG || raw_files) {
        hook.jpeg = calloc((size_t)r->workers, sizeof *hook.jpeg);
        hook.raw = calloc((size_t)r->workers, sizeof *hook.raw);
        if (!hook.jpeg || !hook.raw) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            goto out;
        }
        stk_jpeg_prepare_options jo = {.max_pixels = r->max_pixels,
                                       .max_side = r->max_side,
                                       .quality = r->quality,
                                       .validate = r->validate,
                                       .restart_mcus = r->restart_mcus};
        for (; hook.n < r->workers; hook.n++) {
            st = raw_files ? stk_raw_preparer_create(r->max_pixels, &hook.raw[hook.n])
                           : stk_jpeg_preparer_create(&jo, &hook.jpeg[hook.n]);
            if (st != STK_OK) goto out;
        }
    }
    stk_pack_options o = {.workers = r->workers,
                          .skip_bad = r->skip_bad,
                          .skipped_path = skipped_path,
                          .prepare_file = raw_files ? prepare_raw : prepare_jpeg,
                          .prepare_ctx = &hook,
                          .max_file_bytes = 0,
                          .cancel = r->cancel,
                          .progress = r->progress,
                          .packed_with = packed_with,
                          .shard_bytes = r->shard_bytes};
    st = stk_pack_run(src, r->out, &o, summary);
out:
    for (int i = 0; i < hook.n; i++) {
        stk_jpeg_preparer_destroy(hook.jpeg[i]);
        stk_raw_preparer_destroy(hook.raw[i]);
    }
    free(hook.jpeg);
    free(hook.raw);
    free(skipped_path);
    stk_source_destroy(src);
    return st;
}
