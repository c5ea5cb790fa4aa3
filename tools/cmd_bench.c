/* stoke bench: how fast the loader delivers batches of a dataset. */
#include "augment/transform_spec.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/crc32c.h"
#include "common/progress.h"
#include "common/trace.h"
#include "common/thread_pool.h"
#include "loader/loader.h"
#include "common/json.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_args {
    int64_t batch, workers, prefetch, images, epochs, warmup, seed, io_depth, cache_mb, block_mib,
        block_window;
    int io, output, order;
    const char *transform, *trace, *trace_steps;
    bool direct, no_direct, accurate, cold, no_decode, no_checksum, json;
    double compute_ms;
} bench_args;

static const char *const io_names[] = {"uring", "pread", "mmap", NULL}; /* = stk_io_backend */
static const char *const output_names[] = {"u8", "f32", NULL};

#define T bench_args
static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_INT(T, batch, "batch", "N", 1, 1 << 20, "batch size (default 128, as train's)", .letter = 'b',
                 .alias = {"batch-size"}),
    STK_FLAG_WORKERS(T, workers, "decode/augment threads (default: number of cores)"),
    STK_FLAG_INT(T, prefetch, "prefetch", "N", 1, 64, "batches in the ring (default 3)"),
    STK_FLAG_CHOICE(T, io, "io", "BACKEND", io_names, "uring (default), pread or mmap"),
    STK_FLAG_INT(T, io_depth, "io-depth", "N", 1, 4096,
                 "reads in flight per worker with uring (default 32)"),
    STK_FLAG_BOOL(T, direct, "direct",
                  "O_DIRECT reads (bypass the page cache); the default when the\n"
                  "file and the cache do not fit the memory budget (the machine's\n"
                  "memory or the memory cgroup's limit)"),
    STK_FLAG_BOOL(T, no_direct, "no-direct",
                  "read through the page cache even when the file does not fit"),
    STK_FLAG_INT(T, cache_mb, "cache-mib", "C", 0, STK_LOADER_MAX_CACHE_MIB,
                 "keep the file's first C MiB (whole blocks) in memory for the\n"
                 "whole run, never evicted (a static cache: from the second\n"
                 "epoch on those records cost no device read; default 0)",
                 .old = "cache-mb"),
    STK_FLAG_TEXT(T, transform, "transform", "SPEC",
                  "default: the training transform of the dataset\n"
                  "(rrc:224,flip for JPEG, pad:4,crop:SIZE,flip for raw); pixel ops\n"
                  "such as colorjitter:0.4:0.4:0.4:0.1 or trivialaugment follow the\n"
                  "crop (stoke help transforms lists them)"),
    STK_FLAG_CHOICE(T, output, "dtype", "FMT", output_names,
                    "u8 (HWC, default) or f32 (CHW, normalised if the spec says norm)",
                    .old = "output"),
    STK_FLAG_BOOL(T, accurate, "accurate-decode",
                  "accurate IDCT and upsampling instead of the fast ones"),
    STK_FLAG_INT(T, images, "images", "N", 1, INT64_MAX, "measure N images (default: one epoch)"),
    STK_FLAG_INT(T, epochs, "epochs", "E", 1, 1000000, "measure E whole epochs"),
    STK_FLAG_INT(T, warmup, "warmup", "N", 0, 1000000,
                 "batches delivered before the clock starts (default 2); the\n"
                 "measured epochs then start from their beginning"),
    STK_FLAG_BOOL(T, cold, "cold",
                  "evict the file from the page cache first (posix_fadvise\n"
                  "DONTNEED), so the reads go to the disk"),
    STK_FLAG_BOOL(T, no_decode, "no-decode", "read records only: the I/O path alone"),
    STK_FLAG_NUMBER(T, compute_ms, "compute-ms", "X", 0, 1e6,
                    "the consumer spends X ms per batch (a simulated training\n"
                    "step); the stall share is the time it waited for data"),
    STK_FLAG_SEED(T, seed, "shuffle and augmentation seed (default 0)"),
    STK_FLAG_CHOICE(T, order, "order", "ORDER", stk_read_order_names,
                    "random (a fresh permutation every epoch, default), block (FFCV's\n"
                    "quasi-random order: 8 MiB blocks of the file permuted, 8 shuffled\n"
                    "together: for files larger than memory) or sequential"),
    STK_FLAG_INT(T, block_mib, "block-mib", "N", 1, 1024,
                 "block order and the cache: MiB of the file per block (default 8)"),
    STK_FLAG_INT(T, block_window, "block-window", "N", 1, 1024,
                 "block order: blocks shuffled together (default 8); memory holds\n"
                 "about 2 windows of blocks"),
    STK_FLAG_BOOL(T, no_checksum, "no-checksum",
                  "skip hashing the pixels (the workers' CRC of every sample\n"
                  "costs a little; a training run does not pay it)"),
    STK_FLAG_TEXT(T, trace, "trace", "FILE.json",
                  "a timeline of the measured batches in Chrome's trace format\n"
                  "(https://ui.perfetto.dev): workers' reads, decode, augment, the\n"
                  "consumer's wait per batch, counters, an arrow per batch"),
    STK_FLAG_TEXT(T, trace_steps, "trace-steps", "WAIT,ACTIVE",
                  "record batches WAIT .. WAIT+ACTIVE-1 of the measured ones;\n"
                  "default 0,0 (all)"),
    STK_FLAG_JSON(T, json,
                  "one JSON object on stdout (keys: images, seconds,\n"
                  "images_per_sec, mb_per_sec, stall_pct, peak_rss_mb, read_s,\n"
                  "decode_s, augment_s, wait_s, bad_records, checksum, device_mb,\n"
                  "cache_mb, the settings, per_worker [{read_s, decode_s, augment_s}],\n"
                  "epochs [{images_per_sec, device_mb, read_mb, block_loads,\n"
                  "cache_hit_pct}])"),
    STK_FLAG_END};
#undef T

static const stk_cli cli = {
    .cmd = "bench",
    .usage = "stoke bench [OPTIONS] DATA.stoke",
    .about = "Measure the loader: read, decode and augment the dataset into batches as a\n"
             "training run would, and report images/s, MB/s, time per stage, CPU use, peak\n"
             "memory and the data-stall share.\n",
    .flags = flags,
    .notes = "checksum: a 64-bit hash of every delivered pixel, label and index in order:\n"
             "the same for any --workers and --io.\n"
             "DATA.stoke may be shards read as one: a.stoke,b.stoke or a list file (pack\n"
             "--shard-size writes one).\n"
             "device MB: what the kernel read from the storage device for this process\n"
             "(/proc/self/io read_bytes): page-cache hits are not in it, readahead is.\n",
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected one DATA.stoke",
    .first_arg_names = (const char *const[]){"data", NULL}};

/* Add what the loader did since `since` (this epoch's stats) to *tot. */
static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static void add_stats(stk_loader_stats *tot, const stk_loader *l, const stk_loader_stats *since)
{
    stk_loader_stats now;
    stk_loader_stats_get(l, &now);
    tot->read_s += now.read_s - since->read_s;
    tot->decode_s += now.decode_s - since->decode_s;
    tot->augment_s += now.augment_s - since->augment_s;
    tot->wait_s += now.wait_s - since->wait_s;
    tot->bytes_read += now.bytes_read - since->bytes_read;
    tot->bad_records += now.bad_records - since->bad_records;
    for (int i = 0; i < now.workers && i < STK_LOADER_STATS_WORKERS; i++) {
        tot->worker[i].read_s += now.worker[i].read_s - since->worker[i].read_s;
        tot->worker[i].decode_s += now.worker[i].decode_s - since->worker[i].decode_s;
        tot->worker[i].augment_s += now.worker[i].augment_s - since->worker[i].augment_s;
    }
}

/* The flags into loader options; returns -1 to go on, or the exit code. */
static int parse(int argc, char **argv, bench_args *a, stk_loader_options *o, const char **path)
{
    *o = stk_loader_defaults();
    *a = (bench_args){.batch = 128, /* train's default, so that bench measures its batches */
                      .workers = o->workers,
                      .prefetch = o->prefetch,
                      .io_depth = o->io_depth,
                      .io = (int)o->io,
                      .block_mib = o->block_mib,
                      .block_window = o->block_window,
                      .warmup = 2};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    o->batch_size = (int)a->batch;
    o->workers = (int)a->workers;
    o->prefetch = (int)a->prefetch;
    o->io = (stk_io_backend)a->io;
    o->io_depth = (int)a->io_depth;
    o->direct = a->direct;
    o->direct_auto = !a->no_direct;
    o->cache_mib = (int)a->cache_mb;
    o->block_mib = (int)a->block_mib;
    o->block_window = (int)a->block_window;
    if (a->direct && a->no_direct)
        return stk_cli_usage("bench", "--direct and --no-direct do not go together");
    o->transform = a->transform;
    stk_transform spec;
    if (a->transform && stk_transform_parse(a->transform, &spec) == STK_OK &&
        stk_transform_has_batch_ops(&spec))
        stk_log_warn("--transform %s: erase, mixup and cutmix run on the training device, not in "
                     "the loader: bench measures without them",
                     a->transform);
    o->format = a->output == 1 ? STK_PIXELS_F32_CHW : STK_PIXELS_U8_HWC;
    o->fast_decode = !a->accurate;
    o->read_only = a->no_decode;
    o->seed = (uint64_t)a->seed;
    o->order = (stk_read_order)a->order;
    o->checksum = !a->no_checksum;
    if (a->images && a->epochs)
        return stk_cli_usage("bench", "--images and --epochs do not go together");
    if (a->trace_steps && !a->trace)
        return stk_cli_usage("bench", "--trace-steps needs --trace FILE.json");
    *path = pos[0];
    return -1;
}

/* One measured epoch. */
typedef struct epoch_figures {
    uint64_t images, device_bytes, bytes_read, block_loads, cache_hits;
    double seconds;
} epoch_figures;

/* What a measurement found. */
typedef struct bench_result {
    uint64_t images, device_bytes;
    double seconds, cpu_s;
    epoch_figures *epochs; /* each whole epoch measured (--epochs) */
    uint64_t nepochs;
    stk_loader_stats tot;  /* the measured epochs' figures */
    stk_loader_stats info; /* the loader's state at the end (backend, ring) */
    const stk_dataset *ds;
    uint64_t checksum; /* pixels' CRC << 32 | labels' and indices' CRC */
} bench_result;

static double cpu_seconds(const struct rusage *r)
{
    return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) +
           (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1e-6;
}

/* Drop what the warmup (and earlier runs) left of the file in the page cache. */
static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* Bytes the kernel read from storage for this process so far: page-cache
 * misses, readahead and O_DIRECT reads (its io accounting); 0 if unknown. */
static uint64_t device_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[128];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %" SCNu64, &v) == 1) break;
    fclose(f);
    return v;
}

/* The warmup (untimed), then --images or --epochs of batches, timed. */
static stk_status measure(stk_loader *l, const bench_args *a, const stk_loader_options *o,
                          const char *path, bench_result *res)
{
    memset(res, 0, sizeof *res);
    uint64_t epoch = 0, done_epochs = 0, n = 0, wanted = (uint64_t)a->images;
    uint64_t epochs = !wanted && !a->epochs ? 1 : (uint64_t)a->epochs;
    uint32_t crc_px = 0, crc_lab = 0;
    stk_batch *b;
    STK_TRY(stk_loader_start_epoch(l, epoch));
    for (int64_t i = 0; i < a->warmup; i++) { /* not timed, not counted */
        stk_status st = stk_loader_next(l, &b);
        if (st == STK_END) break;
        STK_TRY(st);
        stk_loader_release(l, b);
    }
    if (a->warmup) STK_TRY(stk_loader_start_epoch(l, epoch)); /* whole epochs from their start */
    if (a->cold) drop_cache(path);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    stk_loader_stats s0;
    stk_loader_stats_get(l, &s0);
    if (!wanted && !(res->epochs = calloc(epochs, sizeof *res->epochs)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    uint64_t dev0 = device_read_bytes(), dev_epoch = dev0, n_epoch = 0;
    double t0 = stk_clock_sec(), t_epoch = t0;
    stk_progress bar;
    stk_progress_init(&bar, "bench", wanted ? wanted : epochs * stk_loader_samples(l), stderr);
    for (;;) {
        stk_trace_step();
        if (stk_cli_interrupted)
            return stk_error(STK_ERR_CANCELLED, "bench interrupted after %" PRIu64 " images", n);
        stk_trace_begin("wait for batch", "consumer");
        stk_status st = stk_loader_next(l, &b);
        stk_trace_end();
        if (st == STK_END) {
            if (res->epochs) {
                stk_loader_stats now;
                stk_loader_stats_get(l, &now);
                uint64_t dev = device_read_bytes();
                double t = stk_clock_sec();
                res->epochs[res->nepochs++] = (epoch_figures){n - n_epoch,
                                                              dev - dev_epoch,
                                                              now.bytes_read - s0.bytes_read,
                                                              now.block_loads - s0.block_loads,
                                                              now.cache_hits - s0.cache_hits,
                                                              t - t_epoch};
                dev_epoch = dev, t_epoch = t, n_epoch = n;
            }
            add_stats(&res->tot, l, &s0);
            memset(&s0, 0, sizeof s0); /* the next epoch's stats start from zero */
            if (epochs && ++done_epochs >= epochs) break;
            STK_TRY(stk_loader_start_epoch(l, ++epoch));
            continue;
        }
        STK_TRY(st);
        stk_trace_begin("consume", "consumer");
        stk_trace_flow('f', b->trace_id);
        stk_trace_end();
        if (o->checksum && !o->read_only) /* per-sample CRCs from the workers, combined in order */
            crc_px = stk_crc32c(crc_px, b->checksums, sizeof *b->checksums * (size_t)b->count);
        crc_lab = stk_crc32c(crc_lab, b->labels, sizeof *b->labels * (size_t)b->count);
        crc_lab = stk_crc32c(crc_lab, b->indices, sizeof *b->indices * (size_t)b->count);
        n += (uint64_t)b->count;
        if (a->compute_ms > 0) { /* a training step that leaves the CPU free, like a GPU's */
            struct timespec ts = {(time_t)(a->compute_ms / 1000),
                                  (long)(fmod(a->compute_ms, 1000) * 1e6)};
            nanosleep(&ts, NULL);
        }
        stk_loader_release(l, b);
        stk_progress_update(&bar, n);
        if (wanted && n >= wanted) {
            add_stats(&res->tot, l, &s0);
            break;
        }
    }
    res->seconds = stk_clock_sec() - t0;
    res->device_bytes = device_read_bytes() - dev0;
    stk_progress_finish(&bar);
    getrusage(RUSAGE_SELF, &ru1);
    res->cpu_s = cpu_seconds(&ru1) - cpu_seconds(&ru0);
    res->images = n;
    stk_loader_stats_get(l, &res->info);
    res->ds = stk_loader_dataset(l);
    res->checksum = (uint64_t)crc_px << 32 | crc_lab;
    return STK_OK;
}

static void report_json(const bench_result *r, const bench_args *a, const stk_loader_options *o,
                        const char *tbuf, const char *sum)
{
    const stk_loader_stats *tot = &r->tot;
    double secs = r->seconds;
    char j[11][STK_JSON_NUMBER]; /* each number its own buffer: one printf uses them all */
#define J(k, x, d) stk_json_number((x), (d), j[k])
    printf("{\"images\": %" PRIu64 ", \"seconds\": %s, \"images_per_sec\": %s, "
           "\"mb_per_sec\": %s, \"stall_pct\": %s, \"peak_rss_mb\": %s, \"read_s\": %s, "
           "\"decode_s\": %s, \"augment_s\": %s, \"wait_s\": %s, \"bad_records\": %" PRIu64
           ", \"checksum\": %s, \"cpu_pct\": %s, \"workers\": %d, \"batch\": %d, "
           "\"prefetch\": %d, \"io\": \"%s\", \"direct\": %s, \"cold\": %s, \"decode\": %s, "
           "\"compute_ms\": %s, \"transform\": ",
           r->images, J(0, secs, 3), J(1, (double)r->images / secs, 1),
           J(2, (double)tot->bytes_read / secs / 1e6, 1), J(3, 100.0 * tot->wait_s / secs, 2),
           J(4, peak_rss_mb(), 1), J(5, tot->read_s, 3), J(6, tot->decode_s, 3),
           J(7, tot->augment_s, 3), J(8, tot->wait_s, 3), tot->bad_records, sum,
           J(9, 100.0 * r->cpu_s / secs, 1), o->workers, o->batch_size, o->prefetch,
           stk_io_backend_name(r->info.io), r->info.direct ? "true" : "false",
           a->cold ? "true" : "false", o->read_only ? "false" : "true", J(10, a->compute_ms, 3));
    stk_json_write_string(stdout, tbuf);
    printf(", \"order\": \"%s\", \"device_mb\": %s, \"cache_mb\": %s",
           stk_read_order_names[o->order], J(0, (double)r->device_bytes / 1e6, 1),
           J(1, (double)r->info.cache_bytes / 1e6, 1));
    printf(", \"epochs\": [");
    for (uint64_t e = 0; e < r->nepochs; e++) {
        const epoch_figures *f = &r->epochs[e];
        printf("%s{\"images_per_sec\": %s, \"device_mb\": %s, \"read_mb\": %s, "
               "\"block_loads\": %" PRIu64 ", \"cache_hit_pct\": %s}",
               e ? ", " : "", J(0, (double)f->images / f->seconds, 1),
               J(1, (double)f->device_bytes / 1e6, 1), J(2, (double)f->bytes_read / 1e6, 1),
               f->block_loads, J(3, f->images ? 100.0 * (double)f->cache_hits / f->images : 0, 2));
    }
    printf("]");
    printf(", \"ring_locked\": %s, \"per_worker\": [", r->info.ring_locked ? "true" : "false");
    for (int i = 0; i < o->workers && i < STK_LOADER_STATS_WORKERS; i++)
        printf("%s{\"read_s\": %s, \"decode_s\": %s, \"augment_s\": %s}", i ? ", " : "",
               J(0, tot->worker[i].read_s, 3), J(1, tot->worker[i].decode_s, 3),
               J(2, tot->worker[i].augment_s, 3));
#undef J
    printf("]}\n");
}

static void report_text(const bench_result *r, const bench_args *a, const stk_loader_options *o,
                        const char *path, const char *tbuf, const char *sum)
{
    const stk_loader_stats *tot = &r->tot;
    double secs = r->seconds, stall = 100.0 * tot->wait_s / secs;
    printf("%s: %" PRIu64 " images in %.2f s: %.0f images/s, %.1f MB/s read\n", path, r->images,
           secs, (double)r->images / secs, (double)tot->bytes_read / secs / 1e6);
    printf("  transform %s, batch %d, %d workers, prefetch %d, io %s%s%s\n", tbuf, o->batch_size,
           o->workers, o->prefetch, stk_io_backend_name(r->info.io),
           r->info.direct ? " (O_DIRECT)" : "", o->read_only ? ", read only" : "");
    printf("  order %s, device %.1f MB read (%.2f x the file)", stk_read_order_names[o->order],
           (double)r->device_bytes / 1e6,
           (double)r->device_bytes / (double)stk_dataset_file_size(r->ds));
    if (r->info.cache_bytes) printf(", static cache %.1f MB", (double)r->info.cache_bytes / 1e6);
    printf("\n");
    for (uint64_t e = 0; r->nepochs > 1 && e < r->nepochs; e++) {
        const epoch_figures *f = &r->epochs[e];
        printf("  epoch %" PRIu64 ": %.0f images/s, device %.1f MB, read %.1f MB in %" PRIu64
               " block reads, cache hits %.1f%%\n",
               e, (double)f->images / f->seconds, (double)f->device_bytes / 1e6,
               (double)f->bytes_read / 1e6, f->block_loads,
               f->images ? 100.0 * (double)f->cache_hits / (double)f->images : 0.0);
    }
    for (int i = 0; i < o->workers && i < STK_LOADER_STATS_WORKERS; i++)
        printf("  worker %d: read %.2f s, decode %.2f s, augment %.2f s\n", i,
               tot->worker[i].read_s, tot->worker[i].decode_s, tot->worker[i].augment_s);
    printf("  all workers: read %.2f s, decode %.2f s, augment %.2f s; consumer waited %.2f s "
           "(stall %.1f%%%s)\n",
           tot->read_s, tot->decode_s, tot->augment_s, tot->wait_s, stall,
           a->compute_ms > 0 ? " with a simulated step" : "");
    /* what the loader holds: the ring, read buffers and, with the block
     * store, the blocks in memory and the cache */
    printf("  CPU %.0f%% (of %d cores), peak RSS %.0f MB (loader holds %.0f MB%s), bad records "
           "%" PRIu64 ", checksum %s\n",
           100.0 * r->cpu_s / secs, stk_cpu_count(), peak_rss_mb(),
           (double)r->info.bytes_held / 1e6, r->info.ring_locked ? ", ring locked" : "",
           tot->bad_records, sum);
}

/* The figures, as text or one JSON object. */
static void report(const bench_result *r, const bench_args *a, const stk_loader_options *o,
                   stk_loader *l, const char *path)
{
    char sum[32] = "null", sum_text[32] = "off";
    if (!a->no_checksum) {
        snprintf(sum, sizeof sum, "\"%016" PRIx64 "\"", r->checksum);
        snprintf(sum_text, sizeof sum_text, "%016" PRIx64, r->checksum);
    }
    char deflt[64];
    stk_loader_default_transform(stk_dataset_meta(stk_loader_dataset(l)), deflt, sizeof deflt);
    const char *tbuf = o->transform ? o->transform : deflt;
    if (a->json)
        report_json(r, a, o, tbuf, sum);
    else
        report_text(r, a, o, path, tbuf, sum_text);
}

static int bench_main(int argc, char **argv)
{
    bench_args a;
    stk_loader_options o;
    const char *path = NULL;
    int rc = parse(argc, argv, &a, &o, &path);
    if (rc >= 0) return rc;
    stk_trace_options trace = {0};
    if (a.trace_steps && stk_trace_parse_schedule(a.trace_steps, &trace) != STK_OK)
        return stk_cli_usage("bench", "%s", stk_last_error());
    stk_cli_catch_interrupt(); /* early: a Ctrl-C during the warmup is an interrupt too */
    if (a.trace) {             /* paused through the warmup: the first measured batch starts it */
        trace.start_paused = true;
        stk_trace_start(&trace);
        stk_trace_thread_name("consumer");
    }
    stk_loader *l;
    stk_status st = stk_loader_open(path, &o, &l);
    if (st != STK_OK) stk_trace_discard();
    if (st == STK_ERR_INVALID_ARG) /* a bad transform or setting: a usage error */
        return stk_cli_usage("bench", "%s", stk_last_error());
    if (st != STK_OK) return stk_cli_fail();
    bench_result res = {0};
    if (stk_loader_batches(l) == 0)
        st = stk_error(STK_ERR_INVALID_ARG,
                       "%s: no batches to deliver (%" PRIu64 " records, batch %d)", path,
                       stk_dataset_count(stk_loader_dataset(l)), o.batch_size);
    else
        st = measure(l, &a, &o, path, &res);
    if (st == STK_OK) report(&res, &a, &o, l, path);
    rc = st == STK_OK ? STK_EXIT_OK : stk_cli_fail();
    free(res.epochs);
    stk_loader_close(l);
    if (a.trace) { /* the workers are joined: their buffers are complete */
        stk_trace_summary ts;
        if (stk_trace_finish(a.trace, &ts) != STK_OK)
            rc = stk_cli_fail();
        else
            fprintf(stderr, "trace: %llu events from %llu threads over %.2f s in %s\n",
                    (unsigned long long)ts.events, (unsigned long long)ts.threads, ts.seconds,
                    a.trace);
    }
    return rc;
}

const stk_command stk_cmd_bench = {"bench", "measure how fast the loader delivers batches", &cli,
                                   bench_main};
