#include "pack/pack.h"

#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "pack/pack_output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Items per chunk and worker: enough to keep every worker busy while bounding
 * the memory of prepared-but-unwritten files. */
#define CHUNK_PER_WORKER 32

typedef struct slot {
    stk_pack_item item;
    uint8_t *file; /* bytes read from disk (file sources) */
    uint64_t bytes_in;
    stk_status status;
    char *error; /* reason when status != OK */
} slot;

typedef struct chunk_ctx {
    const stk_source *src;
    const stk_pack_options *opts;
    size_t first;
    slot *slots;
} chunk_ctx;

static void prepare_raw(const stk_source *src, const stk_source_item *it, slot *s)
{
    size_t n = (size_t)src->width * src->height * src->channels;
    s->file = malloc(n ? n : 1);
    stk_status st = s->file ? stk_source_read_pixels(src, it, s->file)
                            : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st != STK_OK) {
        s->status = st;
        s->error = strdup(stk_last_error());
        return;
    }
    s->item = (stk_pack_item){.data = s->file,
                              .len = n,
                              .width = src->width,
                              .height = src->height,
                              .channels = (int)src->channels,
                              .has_stats = true,
                              .pixels = (uint64_t)src->width * src->height};
    s->bytes_in = n;
    uint64_t sum[3] = {0}, sq[3] = {0};
    int c = (int)src->channels;
    for (size_t i = 0; i < n; i++) {
        unsigned v = s->file[i];
        sum[i % (size_t)c] += v;
        sq[i % (size_t)c] += v * v;
    }
    for (int k = 0; k < 3; k++) {
        s->item.sum[k] = sum[c == 1 ? 0 : k];
        s->item.sumsq[k] = sq[c == 1 ? 0 : k];
    }
}

static void prepare_one(void *p, size_t i, int worker)
{
    chunk_ctx *ctx = p;
    const stk_source_item *it = &ctx->src->items[ctx->first + i];
    slot *s = &ctx->slots[i];
    memset(s, 0, sizeof *s);
    if (!it->path) { /* pixels the source holds (IDX, CIFAR-10) */
        prepare_raw(ctx->src, it, s);
        return;
    }
    stk_status st;
    size_t name_len = strlen(it->name);
    if (!stk_utf8_valid(it->name, name_len)) {
        st = stk_error(STK_ERR_UNSUPPORTED, "file name is not valid UTF-8 (rename the file)");
    } else if (name_len > STK_RECORD_MAX_NAME) {
        st = stk_error(STK_ERR_UNSUPPORTED, "file name is longer than %d bytes",
                       STK_RECORD_MAX_NAME);
    } else {
        size_t len;
        uint64_t limit = ctx->opts->max_file_bytes ? ctx->opts->max_file_bytes : (1u << 30);
        st = stk_file_read_all(it->path, limit, &s->file, &len);
        if (st == STK_OK) {
            s->bytes_in = len;
            st = ctx->opts->prepare_file(ctx->opts->prepare_ctx, worker, s->file, len, &s->item);
        }
    }
    s->status = st;
    if (st != STK_OK) s->error = strdup(stk_last_error());
}

static void release_slot(slot *s)
{
    if (s->item.data && s->item.data != s->file && s->file) free(s->item.data);
    free(s->file);
    free(s->error);
    memset(s, 0, sizeof *s);
}

stk_status stk_pack_run(stk_source *src, const char *out_path, const stk_pack_options *opts,
                        stk_pack_summary *summary)
{
    memset(summary, 0, sizeof *summary);
    double t0 = stk_clock_sec();
    if (src->count == 0)
        return stk_error(STK_ERR_INVALID_ARG, "%s: nothing to pack (no images found)",
                         src->description);
    bool files = src->items[0].path != NULL; /* file sources (folder, list) */
    if (files && !opts->prepare_file)
        return stk_error(STK_ERR_INVALID_ARG, "pack: no prepare function given for files");
    int workers = opts->workers > 0 ? opts->workers : 1;
    /* Raw items cost microseconds: bigger chunks keep the pool's wake-ups rare. */
    size_t chunk = !files ? 8192 : (size_t)workers * CHUNK_PER_WORKER;
    stk_pool *pool = NULL;
    stk_pack_output *w = NULL;
    slot *slots = calloc(chunk, sizeof *slots);
    FILE *skipped = NULL;
    char *skipped_tmp = NULL;
    stk_status st = STK_OK;
    if (!slots) return stk_error(STK_ERR_NOMEM, "out of memory");
    if ((st = stk_pool_create(workers, &pool))) goto out;
    if ((st = stk_pack_output_open(out_path, opts->shard_bytes, src,
                                   opts->packed_with ? opts->packed_with : "stoke " STOKE_VERSION,
                                   &w)))
        goto out;
    if (opts->skip_bad && opts->skipped_path) {
        size_t n = strlen(opts->skipped_path) + 16;
        skipped_tmp = malloc(n);
        if (skipped_tmp) snprintf(skipped_tmp, n, "%s.tmp", opts->skipped_path);
        if (!skipped_tmp || !(skipped = fopen(skipped_tmp, "w"))) {
            st = stk_error(STK_ERR_IO, "%s: cannot create: %s", opts->skipped_path,
                           strerror(errno ? errno : ENOMEM));
            goto out;
        }
    }
    stk_progress bar;
    stk_progress_init(&bar, "pack", src->count, opts->progress);
    for (size_t first = 0; first < src->count; first += chunk) {
        if (opts->cancel && *opts->cancel) {
            st = stk_error(STK_ERR_CANCELLED, "pack interrupted; %s was not written", out_path);
            goto out;
        }
        size_t n = src->count - first < chunk ? src->count - first : chunk;
        chunk_ctx ctx = {src, opts, first, slots};
        stk_pool_parallel_for(pool, n, prepare_one, &ctx);
        for (size_t i = 0; i < n; i++) {
            slot *s = &slots[i];
            const stk_source_item *it = &src->items[first + i];
            summary->bytes_in += s->bytes_in;
            char pname[1024];
            if (s->status) {
                stk_printable(it->path ? it->path : it->name, pname, sizeof pname);
                if (!opts->skip_bad) {
                    st = stk_error(s->status, "%s: %s", pname, s->error ? s->error : "failed");
                    goto out;
                }
                stk_log_warn("skipped %s: %s", pname, s->error ? s->error : "failed");
                if (skipped) fprintf(skipped, "%s\t%s\n", pname, s->error ? s->error : "failed");
                summary->skipped++;
                release_slot(s);
                continue;
            }
            stk_record r = {.encoding = (uint8_t)src->encoding,
                            .channels = (uint8_t)s->item.channels,
                            .width = s->item.width,
                            .height = s->item.height,
                            .label = it->label,
                            .name = it->name,
                            .name_len = (uint32_t)strlen(it->name),
                            .payload = s->item.data,
                            .payload_len = (uint32_t)s->item.len};
            if (s->item.len > UINT32_MAX - 8192) {
                st = stk_error(STK_ERR_LIMIT, "%s: %zu bytes is too large for one record", it->name,
                               s->item.len);
                goto out;
            }
            if ((st = stk_pack_output_put(w, &r, s->item.has_stats, s->item.sum, s->item.sumsq,
                                          s->item.pixels)))
                goto out;
            if (s->item.action >= 0 && s->item.action < STK_PACK_ACTIONS)
                summary->actions[s->item.action]++;
            release_slot(s);
        }
        stk_progress_update(&bar, first + n);
    }
    if (opts->cancel && *opts->cancel) {
        st = stk_error(STK_ERR_CANCELLED, "pack interrupted; %s was not written", out_path);
        goto out;
    }
    if (stk_pack_output_count(w) == 0) {
        st = stk_error(STK_ERR_INVALID_ARG, "%s: every input was bad; nothing to pack",
                       src->description);
        goto out;
    }
    if ((st = stk_pack_output_finish(w, &summary->bytes_out))) goto out;
    summary->records = stk_pack_output_count(w);
    summary->shards = stk_pack_output_shards(w);
    summary->classes = src->num_classes;
    stk_progress_finish(&bar);
    if (skipped) {
        /* The list describes this OUT: replace an older one, or remove it. */
        int bad = fclose(skipped) != 0;
        skipped = NULL;
        if (summary->skipped == 0)
            unlink(opts->skipped_path);
        else if (bad || rename(skipped_tmp, opts->skipped_path) != 0)
            stk_log_warn("%s: cannot write the list of skipped files", opts->skipped_path);
    }
out:
    for (size_t i = 0; i < chunk; i++) release_slot(&slots[i]);
    free(slots);
    stk_pool_destroy(pool);
    stk_pack_output_close(w);
    if (skipped) fclose(skipped);
    if (skipped_tmp) unlink(skipped_tmp);
    free(skipped_tmp);
    summary->seconds = stk_clock_sec() - t0;
    return st;
}
