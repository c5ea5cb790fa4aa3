/* loader/: sampler, readers, the loader's order, determinism, bad records,
 * positions, shutdown in every state. */
#include "common/crc32c.h"
#include "common/fs.h"
#include "loader/block_store.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "storage/writer.h"
#include "tests/check_main.h"
#include "tests/test_tmpdir.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char jpeg_path[1024];

/* ---- sampler ---- */

/* Block order: still a permutation from (seed, epoch), other each epoch;
 * each window of `window` blocks covers at most that many blocks of the
 * file; two ranks' shares are the one-rank order cut in two. */
START_TEST(sampler_block_order)
{
    const uint64_t n = 999, b = 37; /* 27 full blocks: windows of w * b records */
    const int w = 3;
    stk_sampler s, again, r0, r1;
    stk_sampler_options o = {.count = n,
                             .batch_size = 10,
                             .shuffle = true,
                             .seed = 5,
                             .world = 1,
                             .block_records = b,
                             .window = w};
    ck_assert_int_eq(stk_sampler_init(&s, &o), STK_OK);
    ck_assert_int_eq(stk_sampler_init(&again, &o), STK_OK);
    uint64_t first[1000];
    for (int e = 0; e < 3; e++) {
        stk_sampler_epoch(&s, (uint64_t)e);
        stk_sampler_epoch(&again, (uint64_t)e);
        char seen[1000] = {0};
        int moved = 0;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t i = stk_sampler_index(&s, k);
            ck_assert_uint_eq(i, stk_sampler_index(&again, k)); /* (seed, epoch) alone */
            ck_assert_int_eq(seen[i], 0);
            seen[i] = 1;
            if (e == 0) first[k] = i;
            moved += e > 0 && first[k] != i;
        }
        if (e > 0) ck_assert_int_gt(moved, 900); /* another order each epoch */
        for (uint64_t i = 0; i < n; i++) ck_assert(seen[i]);
        /* every window: records of at most w blocks, and a window spans w * b records
         * (the last one fewer) */
        for (uint64_t at = 0; at < n; at += (uint64_t)w * b) {
            uint64_t blocks[16], nb = 0;
            for (uint64_t k = at; k < at + (uint64_t)w * b && k < n; k++) {
                uint64_t blk = stk_sampler_index(&s, k) / b;
                bool have = false;
                for (uint64_t j = 0; j < nb && !have; j++) have = blocks[j] == blk;
                if (!have) blocks[nb++] = blk;
                ck_assert_uint_le(nb, (uint64_t)w);
            }
        }
    }
    /* not block-sorted inside a window: the records are shuffled there */
    int in_order = 0;
    for (uint64_t k = 1; k < n; k++)
        in_order += stk_sampler_index(&s, k) == stk_sampler_index(&s, k - 1) + 1;
    ck_assert_int_lt(in_order, 100);
    /* two ranks: positions r, r + 2, ... of the same global order */
    o.world = 2;
    o.rank = 0;
    ck_assert_int_eq(stk_sampler_init(&r0, &o), STK_OK);
    o.rank = 1;
    ck_assert_int_eq(stk_sampler_init(&r1, &o), STK_OK);
    stk_sampler_epoch(&r0, 2);
    stk_sampler_epoch(&r1, 2);
    for (uint64_t k = 0; k < n / 2; k++) {
        ck_assert_uint_eq(stk_sampler_index(&r0, k), stk_sampler_index(&s, 2 * k));
        ck_assert_uint_eq(stk_sampler_index(&r1, k), stk_sampler_index(&s, 2 * k + 1));
    }
    stk_sampler_deinit(&s);
    stk_sampler_deinit(&again);
    stk_sampler_deinit(&r0);
    stk_sampler_deinit(&r1);
}
END_TEST

START_TEST(sampler_is_an_exact_permutation_per_epoch)
{
    stk_sampler s;
    stk_sampler_options o = {
        .count = 1000, .batch_size = 64, .shuffle = true, .seed = 3, .world = 1};
    ck_assert_int_eq(stk_sampler_init(&s, &o), STK_OK);
    ck_assert_uint_eq(s.batches, 16);
    ck_assert_int_eq(stk_sampler_batch_len(&s, 15), 1000 - 15 * 64);
    uint64_t first[1000];
    for (int e = 0; e < 3; e++) {
        stk_sampler_epoch(&s, (uint64_t)e);
        char seen[1000] = {0};
        int moved = 0;
        for (uint64_t k = 0; k < s.samples; k++) {
            uint64_t i = stk_sampler_index(&s, k);
            ck_assert_uint_lt(i, 1000);
            ck_assert_int_eq(seen[i], 0);
            seen[i] = 1;
            if (e == 0)
                first[k] = i;
            else
                moved += first[k] != i;
            moved += e == 0 && i != k;
        }
        ck_assert_int_gt(moved, 900); /* shuffled, and differently in each epoch */
    }
    stk_sampler_epoch(&s, 0);
    for (uint64_t k = 0; k < 1000; k++) ck_assert_uint_eq(stk_sampler_index(&s, k), first[k]);
    stk_sampler_deinit(&s);
    o.shuffle = false;
    o.drop_last = true;
    ck_assert_int_eq(stk_sampler_init(&s, &o), STK_OK);
    ck_assert_uint_eq(s.batches, 15);
    ck_assert_uint_eq(s.samples, 960);
    for (uint64_t k = 0; k < 960; k++) ck_assert_uint_eq(stk_sampler_index(&s, k), k);
    stk_sampler_deinit(&s);
    o.rank = 2;
    ck_assert_int_eq(stk_sampler_init(&s, &o), STK_ERR_INVALID_ARG);
    o.batch_size = 0;
    o.rank = 0;
    ck_assert_int_eq(stk_sampler_init(&s, &o), STK_ERR_INVALID_ARG);
}
END_TEST

START_TEST(sampler_shards_evenly)
{
    for (int drop = 0; drop < 2; drop++) {
        int counts[10] = {0};
        uint64_t per = 0;
        for (int rank = 0; rank < 3; rank++) {
            stk_sampler s;
            stk_sampler_options o = {.count = 10,
                                     .batch_size = 2,
                                     .shuffle = true,
                                     .seed = 1,
                                     .rank = rank,
                                     .world = 3,
                                     .drop_uneven = drop};
            ck_assert_int_eq(stk_sampler_init(&s, &o), STK_OK);
            stk_sampler_epoch(&s, 4);
            if (rank == 0) per = s.samples;
            ck_assert_uint_eq(s.samples, per); /* every rank: the same number */
            for (uint64_t k = 0; k < s.samples; k++) counts[stk_sampler_index(&s, k)]++;
            stk_sampler_deinit(&s);
        }
        int total = 0, twice = 0, missing = 0;
        for (int i = 0; i < 10; i++) {
            total += counts[i];
            twice += counts[i] > 1;
            missing += counts[i] == 0;
        }
        if (drop) { /* 3 each, disjoint, one record left out */
            ck_assert_uint_eq(per, 3);
            ck_assert_int_eq(twice, 0);
            ck_assert_int_eq(missing, 1);
        } else { /* 4 each: two records wrap around to a second use */
            ck_assert_uint_eq(per, 4);
            ck_assert_int_eq(total, 12);
            ck_assert_int_eq(missing, 0);
            ck_assert_int_eq(twice, 2);
        }
    }
}
END_TEST

/* ---- a test dataset: JPEG records from the fixtures ---- */

static const char *fixture(const char *rel)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s",
             getenv("STOKE_FIXTURES") ? getenv("STOKE_FIXTURES") : "fixtures", rel);
    return buf;
}

/* n records cycling over a few photo-like JPEGs of several sizes; record
 * `bad` (if >= 0) gets a payload that is not a JPEG. */
#define ALL_BAD (-2)

/* n records cycling through six fixture JPEGs; record `bad` (or every one,
 * ALL_BAD) holds junk instead. */
static void make_dataset(const char *path, int n, int bad)
{
    static const char *files[] = {"good/cat/cat_0.jpg", "good/cat/cat_1.jpg", "good/cat/cat_3.jpg",
                                  "good/dog/dog_0.jpg", "single/gray.jpg",    "single/sub422.jpg"};
    static const uint32_t dims[][2] = {{64, 48}, {80, 80}, {120, 90}, {72, 56}, {40, 30}, {75, 53}};
    uint8_t *data[6];
    size_t len[6];
    for (int f = 0; f < 6; f++)
        ck_assert_int_eq(stk_file_read_all(fixture(files[f]), 1 << 24, &data[f], &len[f]), STK_OK);
    stk_writer *w;
    ck_assert_int_eq(stk_writer_open(path, &w), STK_OK);
    stk_meta m = {.encoding = STK_ENCODING_JPEG,
                  .channels = 3,
                  .min_width = 40,
                  .max_width = 120,
                  .min_height = 30,
                  .max_height = 90};
    char *names[] = {"zero", "one", "two"};
    ck_assert_int_eq(stk_meta_set_classes(&m, names, 3), STK_OK);
    uint8_t junk[100];
    memset(junk, 0x42, sizeof junk);
    for (int i = 0; i < n; i++) {
        int f = i % 6;
        char name[64];
        snprintf(name, sizeof name, "rec%03d.jpg", i);
        stk_record r = {.encoding = STK_ENCODING_JPEG,
                        .channels = f == 4 ? 1 : 3,
                        .width = dims[f][0],
                        .height = dims[f][1],
                        .label = i % 3,
                        .name = name,
                        .name_len = (uint32_t)strlen(name),
                        .payload = i == bad || bad == ALL_BAD ? junk : data[f],
                        .payload_len =
                            (uint32_t)(i == bad || bad == ALL_BAD ? sizeof junk : len[f])};
        ck_assert_int_eq(stk_writer_put(w, &r), STK_OK);
        m.class_counts[i % 3]++;
    }
    ck_assert_int_eq(stk_writer_finish(w, &m, NULL), STK_OK);
    stk_writer_close(w);
    stk_meta_deinit(&m);
    for (int f = 0; f < 6; f++) free(data[f]);
}

static void setup(void)
{
    test_tmpdir_create("loader");
    snprintf(jpeg_path, sizeof jpeg_path, "%s", tpath("photos.stoke"));
    make_dataset(jpeg_path, 70, -1);
}

static void teardown(void) { test_tmpdir_remove(); }

static stk_loader_options opts(int workers, stk_io_backend io)
{
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = 16;
    o.workers = workers;
    o.prefetch = 2;
    o.io = io;
    o.io_depth = 4;
    o.transform = "rrc:24,flip";
    o.seed = 77;
    return o;
}

/* Run one epoch; return a hash of pixels, labels and indices in order. */
static uint64_t epoch_hash(stk_loader *l, uint64_t epoch, int *batches, int *images)
{
    uint32_t a = 0, b = 0;
    *batches = *images = 0;
    ck_assert_int_eq(stk_loader_start_epoch(l, epoch), STK_OK);
    stk_batch *bt;
    stk_status st;
    uint64_t expect = 0;
    while ((st = stk_loader_next(l, &bt)) == STK_OK) {
        ck_assert_uint_eq(bt->number, expect++);
        a = stk_crc32c(a, bt->data, bt->sample_bytes * (size_t)bt->count);
        b = stk_crc32c(b, bt->labels, sizeof *bt->labels * (size_t)bt->count);
        b = stk_crc32c(b, bt->indices, sizeof *bt->indices * (size_t)bt->count);
        (*batches)++;
        *images += bt->count;
        stk_loader_release(l, bt);
    }
    ck_assert_msg(st == STK_END, "%s", stk_last_error());
    return (uint64_t)a << 32 | b;
}

START_TEST(batches_identical_for_any_workers_and_backend)
{
    uint64_t ref = 0, ref1 = 0;
    static const int workers[] = {1, 2, 4};
    for (int wi = 0; wi < 3; wi++)
        for (int io = 0; io < 3; io++) {
            stk_loader_options o = opts(workers[wi], (stk_io_backend)io);
            stk_loader *l;
            ck_assert_msg(stk_loader_open(jpeg_path, &o, &l) == STK_OK, "%s", stk_last_error());
            int nb, ni;
            uint64_t h = epoch_hash(l, 0, &nb, &ni);
            ck_assert_int_eq(nb, 5);
            ck_assert_int_eq(ni, 70);
            uint64_t h1 = epoch_hash(l, 1, &nb, &ni);
            if (wi == 0 && io == 0) ref = h, ref1 = h1;
            ck_assert_msg(h == ref && h1 == ref1, "workers %d io %d differ", workers[wi], io);
            ck_assert(h != h1); /* another epoch, other order and crops */
            stk_loader_stats s;
            stk_loader_stats_get(l, &s);
            ck_assert_uint_eq(s.images, 70);
            ck_assert_uint_gt(s.bytes_read, 0);
            stk_loader_close(l);
        }
}
END_TEST

/* Epoch e + 1 is started by the workers before start_epoch(e + 1) (the ring
 * stays full across the boundary): the result equals a fresh start. */
START_TEST(next_epoch_prefetch_matches_a_fresh_start)
{
    stk_loader_options o = opts(2, STK_IO_URING);
    o.prefetch = 4;
    stk_loader *a, *b;
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &a), STK_OK);
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &b), STK_OK);
    int nb, ni;
    epoch_hash(a, 0, &nb, &ni);
    usleep(200000); /* let the workers fill the ring with epoch 1 */
    uint64_t ahead = epoch_hash(a, 1, &nb, &ni);
    ck_assert_int_eq(ni, 70);
    uint64_t fresh = epoch_hash(b, 1, &nb, &ni);
    ck_assert(ahead == fresh);
    /* and jumping to another epoch than the next one discards the prefetched */
    ck_assert(epoch_hash(a, 5, &nb, &ni) == epoch_hash(b, 5, &nb, &ni));
    stk_loader_close(a);
    stk_loader_close(b);
}
END_TEST

/* A bounded wait: STK_AGAIN while the batch is not ready (waits of 1 ms on
 * one worker decoding JPEGs), and in the end the same batches as next(). */
START_TEST(next_wait_gives_again_then_the_same_batches)
{
    stk_loader_options o = opts(1, STK_IO_URING);
    stk_loader *a, *b;
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &a), STK_OK);
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &b), STK_OK);
    int nb, ni;
    uint64_t want = epoch_hash(b, 3, &nb, &ni);
    ck_assert_int_eq(stk_loader_start_epoch(a, 3), STK_OK);
    stk_batch *x;
    uint32_t h = 0, g = 0;
    int again = 0, got = 0;
    stk_status st;
    while ((st = stk_loader_next_wait(a, 0.001, &x)) != STK_END) {
        if (st == STK_AGAIN) {
            again++;
            continue;
        }
        ck_assert_int_eq(st, STK_OK);
        h = stk_crc32c(h, x->data, x->sample_bytes * (size_t)x->count);
        g = stk_crc32c(g, x->labels, sizeof *x->labels * (size_t)x->count);
        g = stk_crc32c(g, x->indices, sizeof *x->indices * (size_t)x->count);
        got += x->count;
        stk_loader_release(a, x);
    }
    ck_assert_int_eq(got, 70);
    ck_assert((uint64_t)h << 32 == (want & 0xffffffff00000000u));
    ck_assert_uint_eq(g, (uint32_t)want);
    /* (how many waits ran out depends on the machine: not asserted) */
    (void)again;
    stk_loader_close(a);
    stk_loader_close(b);
}
END_TEST

START_TEST(labels_and_indices_follow_the_sampler)
{
    stk_loader_options o = opts(2, STK_IO_PREAD);
    stk_loader *l;
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
    stk_sampler s;
    stk_sampler_options so = {
        .count = 70, .batch_size = 16, .shuffle = true, .seed = 77, .world = 1};
    stk_sampler_init(&s, &so);
    stk_sampler_epoch(&s, 3);
    stk_loader_start_epoch(l, 3);
    stk_batch *b;
    while (stk_loader_next(l, &b) == STK_OK) {
        ck_assert_int_eq(b->width, 24);
        ck_assert_uint_eq(b->sample_bytes, 24 * 24 * 3);
        for (int j = 0; j < b->count; j++) {
            uint64_t k = b->number * 16 + (uint64_t)j;
            ck_assert_uint_eq(b->indices[j], stk_sampler_index(&s, k));
            ck_assert_int_eq(b->labels[j], (int)(b->indices[j] % 3));
        }
        stk_loader_release(l, b);
    }
    stk_sampler_deinit(&s);
    stk_loader_close(l);
}
END_TEST

START_TEST(position_restores_the_remaining_batches)
{
    stk_loader_options o = opts(2, STK_IO_URING);
    o.order = _i ? STK_ORDER_BLOCK : STK_ORDER_RANDOM;
    stk_loader *a, *b;
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &a), STK_OK);
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &b), STK_OK);
    stk_loader_start_epoch(a, 2);
    stk_batch *x, *y;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(stk_loader_next(a, &x), STK_OK);
        stk_loader_release(a, x);
    }
    stk_loader_position p = stk_loader_position_get(a);
    ck_assert(p.epoch == 2 && p.cursor == 2 && p.seed == 77);
    ck_assert_int_eq(stk_loader_restore(b, &p), STK_OK);
    for (;;) {
        stk_status sa = stk_loader_next(a, &x), sb = stk_loader_next(b, &y);
        ck_assert_int_eq(sa, sb);
        if (sa) break;
        ck_assert_uint_eq(x->number, y->number);
        ck_assert(memcmp(x->data, y->data, x->sample_bytes * (size_t)x->count) == 0);
        ck_assert(memcmp(x->indices, y->indices, sizeof *x->indices * (size_t)x->count) == 0);
        stk_loader_release(a, x);
        stk_loader_release(b, y);
    }
    stk_loader_position bad = {.seed = 5, .epoch = 0, .cursor = 0};
    ck_assert_int_eq(stk_loader_restore(b, &bad), STK_ERR_INVALID_ARG);
    bad.seed = 77, bad.cursor = 99;
    ck_assert_int_eq(stk_loader_restore(b, &bad), STK_ERR_INVALID_ARG);
    stk_loader_close(a);
    stk_loader_close(b);
}
END_TEST

START_TEST(bad_record_skip_and_error)
{
    const char *path = tpath("bad.stoke");
    make_dataset(path, 40, 13);
    stk_loader_options o = opts(2, STK_IO_URING);
    o.shuffle = false;
    stk_loader *l;
    ck_assert_int_eq(stk_loader_open(path, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    stk_batch *b;
    int images = 0;
    while (stk_loader_next(l, &b) == STK_OK) {
        for (int j = 0; j < b->count; j++) {
            uint64_t k = b->number * 16 + (uint64_t)j;
            /* record 13 is replaced by the next of the permutation: 14 */
            ck_assert_uint_eq(b->indices[j], k == 13 ? 14 : k);
        }
        images += b->count;
        stk_loader_release(l, b);
    }
    ck_assert_int_eq(images, 40);
    stk_loader_stats s;
    stk_loader_stats_get(l, &s);
    ck_assert_uint_eq(s.bad_records, 1);
    stk_loader_close(l);
    o.bad_policy = STK_BAD_ERROR;
    ck_assert_int_eq(stk_loader_open(path, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    stk_status st = stk_loader_next(l, &b);
    ck_assert_int_eq(st, STK_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(stk_last_error(), "record 13 (rec013.jpg): not a JPEG"), "%s",
                  stk_last_error());
    ck_assert_int_eq(stk_loader_next(l, &b), STK_END); /* the epoch ends with the error */
    stk_loader_close(l);
}
END_TEST

/* A dataset bad everywhere stops after a bounded number of replacements,
 * naming the file and the cause; a transform that cannot fit the smallest
 * images is refused at open, before any sample fails. */
START_TEST(bad_everywhere_and_transform_that_cannot_fit)
{
    const char *path = tpath("allbad.stoke");
    make_dataset(path, 200, ALL_BAD);
    stk_loader_options o = opts(1, STK_IO_PREAD);
    o.shuffle = false;
    stk_loader *l;
    ck_assert_int_eq(stk_loader_open(path, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    stk_batch *b;
    ck_assert_int_eq(stk_loader_next(l, &b), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "allbad.stoke: record 0 (rec000.jpg): not a JPEG") &&
                      strstr(stk_last_error(), "the 16 records tried after it were bad too"),
                  "%s", stk_last_error());
    stk_loader_stats s;
    stk_loader_stats_get(l, &s);
    /* at most 17 tries per sample (the workers may have started every batch),
     * where the whole dataset per sample would be 200 * 200 */
    ck_assert_uint_le(s.bad_records, 200 * 17);
    stk_loader_close(l);
    o.transform = "pad:4,crop:64";
    ck_assert_int_eq(stk_loader_open(path, &o, &l), STK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(stk_last_error(), "allbad.stoke: transform \"pad:4,crop:64\": crop:64 is "
                                           "larger than the smallest images (40x30, 48x38"),
                  "%s", stk_last_error());
    o.transform = "pad:4,crop:38";
    ck_assert_int_eq(stk_loader_open(path, &o, &l), STK_OK);
    stk_loader_close(l);
    /* A transform longer than any fixed buffer is used whole, not cut: the
     * size token comes last. */
    const char *good = tpath("good.stoke");
    make_dataset(good, 20, -1);
    char longspec[400];
    int n = 0;
    while (n < 300) n += snprintf(longspec + n, sizeof longspec - (size_t)n, "flip:0.5,");
    snprintf(longspec + n, sizeof longspec - (size_t)n, "center:28");
    o.transform = longspec;
    ck_assert_int_eq(stk_loader_open(good, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    ck_assert_int_eq(stk_loader_next(l, &b), STK_OK);
    ck_assert_int_eq(b->width, 28);
    stk_loader_release(l, b);
    stk_loader_close(l);
}
END_TEST

START_TEST(truncated_file_is_a_bad_record_not_garbage)
{
    const char *path = tpath("cut.stoke");
    make_dataset(path, 40, -1);
    for (int io = 0; io < 2; io++) { /* uring, pread: short reads */
        stk_loader_options o = opts(1, (stk_io_backend)io);
        o.shuffle = false;
        o.bad_policy = STK_BAD_ERROR;
        stk_loader *l;
        ck_assert_int_eq(stk_loader_open(path, &o, &l), STK_OK);
        uint64_t off;
        uint32_t len;
        stk_dataset_span(stk_loader_dataset(l), 20, &off, &len);
        uint64_t cut = off + len / 2;
        ck_assert_int_eq(truncate(path, (off_t)cut), 0); /* after open */
        stk_loader_start_epoch(l, 0);
        stk_batch *b;
        stk_status st;
        while ((st = stk_loader_next(l, &b)) == STK_OK) {
            /* what is delivered was read whole */
            for (int j = 0; j < b->count; j++) {
                stk_dataset_span(stk_loader_dataset(l), b->indices[j], &off, &len);
                ck_assert_uint_le(off + len, cut);
            }
            stk_loader_release(l, b);
        }
        ck_assert_int_eq(st, STK_ERR_CORRUPT);
        ck_assert_msg(strstr(stk_last_error(), "short read"), "%s", stk_last_error());
        stk_loader_close(l);
        make_dataset(path, 40, -1);
    }
}
END_TEST

START_TEST(close_in_every_state)
{
    stk_loader_options o = opts(3, STK_IO_URING);
    stk_loader *l;
    /* never started */
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
    stk_loader_close(l);
    stk_loader_close(NULL);
    /* workers blocked on a full ring, the consumer never reads */
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    usleep(100000);
    stk_loader_close(l);
    /* mid-epoch, holding a batch */
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    stk_batch *b;
    ck_assert_int_eq(stk_loader_next(l, &b), STK_OK);
    stk_loader_close(l);
    /* holding every buffer and asking for more: an error, not a hang */
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
    stk_loader_start_epoch(l, 0);
    stk_batch *h1, *h2;
    ck_assert_int_eq(stk_loader_next(l, &h1), STK_OK);
    ck_assert_int_eq(stk_loader_next(l, &h2), STK_OK);
    ck_assert_int_eq(stk_loader_next(l, &b), STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "ring buffers are held"));
    /* restarting an epoch while holding batches keeps them: their pixels stay
     * as they were until released, and the ring has no buffer left */
    size_t bytes = h1->sample_bytes * (size_t)h1->count;
    uint8_t *copy1 = malloc(bytes), *copy2 = malloc(bytes);
    memcpy(copy1, h1->data, bytes);
    memcpy(copy2, h2->data, bytes);
    ck_assert_int_eq(stk_loader_start_epoch(l, 4), STK_OK);
    ck_assert_int_eq(stk_loader_next(l, &b), STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "ring buffers are held"));
    stk_loader_release(l, h2); /* one buffer back: the new epoch runs through it */
    int nb, ni;
    epoch_hash(l, 5, &nb, &ni);
    ck_assert_int_eq(ni, 70);
    ck_assert(memcmp(copy1, h1->data, bytes) == 0); /* untouched by two epochs */
    stk_loader_release(l, h1);
    epoch_hash(l, 6, &nb, &ni);
    ck_assert_int_eq(ni, 70);
    free(copy1);
    free(copy2);
    stk_loader_close(l);
}
END_TEST

START_TEST(edge_sizes)
{
    stk_loader_options o = opts(8, STK_IO_PREAD); /* more workers than records */
    o.batch_size = 500;                           /* batch larger than the dataset */
    const char *small = tpath("small.stoke");
    make_dataset(small, 5, -1);
    stk_loader *l;
    ck_assert_int_eq(stk_loader_open(small, &o, &l), STK_OK);
    int nb, ni;
    epoch_hash(l, 0, &nb, &ni);
    ck_assert(nb == 1 && ni == 5);
    stk_loader_close(l);
    o.drop_last = true; /* ... and dropped: no batch at all */
    ck_assert_int_eq(stk_loader_open(small, &o, &l), STK_OK);
    ck_assert_uint_eq(stk_loader_batches(l), 0);
    epoch_hash(l, 0, &nb, &ni);
    ck_assert_int_eq(nb, 0);
    stk_loader_close(l);
    /* an empty dataset */
    const char *empty = tpath("empty.stoke");
    make_dataset(empty, 0, -1);
    o.drop_last = false;
    ck_assert_int_eq(stk_loader_open(empty, &o, &l), STK_OK);
    epoch_hash(l, 0, &nb, &ni);
    ck_assert_int_eq(nb, 0);
    stk_loader_close(l);
    /* options and transforms that cannot work */
    o.transform = "resize:32";
    ck_assert_int_eq(stk_loader_open(small, &o, &l), STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "varying sizes"));
    o.transform = "rrc:0";
    ck_assert_int_eq(stk_loader_open(small, &o, &l), STK_ERR_INVALID_ARG);
    o.transform = "rrc:8";
    o.prefetch = 0;
    ck_assert_int_eq(stk_loader_open(small, &o, &l), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_loader_open(tpath("missing.stoke"), &o, &l), STK_ERR_IO);
}
END_TEST

START_TEST(direct_io_gives_the_same_batches)
{
    stk_loader_options o = opts(2, STK_IO_URING);
    stk_loader *l;
    ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
    int nb, ni;
    uint64_t ref = epoch_hash(l, 0, &nb, &ni);
    stk_loader_close(l);
    for (int io = 0; io < 2; io++) {
        o = opts(2, (stk_io_backend)io);
        o.direct = true;
        ck_assert_int_eq(stk_loader_open(jpeg_path, &o, &l), STK_OK);
        ck_assert(epoch_hash(l, 0, &nb, &ni) == ref);
        stk_loader_close(l);
    }
}
END_TEST

/* ---- the block store (block order, the static cache) ---- */

/* Read every sample of `epoch` through the store in chunks of 5, checking
 * each record's bytes against a pread; the most memory it held. */
static uint64_t store_epoch(stk_block_store *bs, stk_dataset *ds, stk_sampler *s, uint64_t epoch)
{
    int p = (int)(epoch & 1);
    stk_sampler_epoch(s, epoch);
    stk_block_store_plan(bs, p, s, 0);
    stk_block_store_activate(bs, p, true);
    stk_block_store_activate(bs, !p, false);
    uint64_t most = 0;
    uint8_t buf[1 << 16];
    for (uint64_t k = 0; k < s->samples; k += 5) {
        stk_read_req reqs[5];
        int n = s->samples - k < 5 ? (int)(s->samples - k) : 5;
        for (int i = 0; i < n; i++) {
            reqs[i].index = stk_sampler_index(s, k + (uint64_t)i);
            reqs[i].given = stk_block_store_serves(bs, reqs[i].index);
            ck_assert(reqs[i].given);
        }
        uint64_t bytes = 0;
        stk_block_store_acquire(bs, p, reqs, n, &bytes);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(reqs[i].status == STK_OK, "%s", reqs[i].error);
            size_t len;
            ck_assert_int_eq(stk_dataset_pread(ds, reqs[i].index, buf, sizeof buf, &len), STK_OK);
            ck_assert_uint_eq(len, reqs[i].len);
            ck_assert(memcmp(buf, reqs[i].data, len) == 0);
        }
        stk_block_store_stats st;
        stk_block_store_stats_get(bs, -1, &st);
        if (st.bytes_held > most) most = st.bytes_held;
        stk_block_store_release(bs, p, reqs, n);
    }
    return most;
}

/* A store of blocks of `block_records` over a 40-record dataset at path,
 * the file then cut in the middle of record `cut_in` (after the open, as a
 * file truncated under a reader). */
static stk_block_store *store_over_cut_file(const char *path, uint64_t block_records,
                                            uint64_t cut_in, stk_dataset **ds)
{
    make_dataset(path, 40, -1);
    ck_assert_int_eq(stk_dataset_open(path, ds), STK_OK);
    stk_block_store *bs;
    stk_block_store_options bo = {.block_records = block_records, .all = true};
    ck_assert_int_eq(stk_block_store_create(*ds, &bo, &bs), STK_OK);
    uint64_t off;
    uint32_t len;
    stk_dataset_span(*ds, cut_in, &off, &len);
    ck_assert_int_eq(truncate(path, (off_t)(off + len / 2)), 0);
    return bs;
}

/* A block whose read fails (the file cut short under the store) is read
 * once an epoch, not once per record: every record of it gets the error. */
START_TEST(block_store_reads_a_failed_block_once_an_epoch)
{
    const char *path = tpath("cutblock.stoke");
    stk_dataset *ds;
    stk_block_store *bs = store_over_cut_file(path, 8, 36, &ds); /* in the last block, 32..39 */
    stk_sampler s;
    stk_sampler_options so = {.count = 40, .batch_size = 8, .world = 1, .block_records = 8};
    ck_assert_int_eq(stk_sampler_init(&s, &so), STK_OK);
    for (uint64_t e = 0; e < 2; e++) {
        int p = (int)(e & 1);
        stk_sampler_epoch(&s, e);
        stk_block_store_stats_reset(bs, p);
        stk_block_store_plan(bs, p, &s, 0);
        stk_block_store_activate(bs, p, true);
        stk_block_store_activate(bs, !p, false);
        for (uint64_t i = 32; i < 40; i++) {
            stk_read_req q = {.index = i, .given = true};
            stk_block_store_acquire(bs, p, &q, 1, NULL);
            ck_assert_int_eq(q.status, STK_ERR_CORRUPT);
            ck_assert_msg(strstr(q.error, "short read"), "%s", q.error);
            stk_block_store_release(bs, p, &q, 1);
        }
        stk_block_store_stats st;
        stk_block_store_stats_get(bs, p, &st);
        ck_assert_uint_eq(st.loads, 0); /* no read succeeded */
        ck_assert_uint_eq(st.served, 0);
        ck_assert_uint_eq(st.failed_loads, 1); /* read once this epoch, not 8 times */
    }
    stk_block_store_destroy(bs);
    stk_sampler_deinit(&s);
    stk_dataset_close(ds);
    make_dataset(path, 40, -1);
}
END_TEST

START_TEST(block_store_reads_each_block_once_and_frees_it)
{
    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(jpeg_path, &ds), STK_OK);
    stk_sampler s;
    stk_sampler_options so = {.count = 70,
                              .batch_size = 16,
                              .shuffle = true,
                              .seed = 5,
                              .world = 1,
                              .block_records = 8,
                              .window = 3};
    ck_assert_int_eq(stk_sampler_init(&s, &so), STK_OK);
    for (int direct = 0; direct < 2; direct++) {
        stk_block_store *bs;
        stk_block_store_options bo = {.block_records = 8, .all = true, .direct = direct};
        ck_assert_int_eq(stk_block_store_create(ds, &bo, &bs), STK_OK);
        for (uint64_t e = 0; e < 3; e++) {
            stk_block_store_stats_reset(bs, (int)(e & 1));
            uint64_t most = store_epoch(bs, ds, &s, e);
            stk_block_store_stats st;
            stk_block_store_stats_get(bs, (int)(e & 1), &st);
            ck_assert_uint_eq(st.loads, 9); /* 70 records in blocks of 8: each read once */
            ck_assert_uint_eq(st.served, 70);
            ck_assert_uint_eq(st.hits, 0);
            /* blocks are freed as the windows pass: never all of them in memory */
            ck_assert_uint_lt(most, st.bytes_read);
            stk_block_store_stats_get(bs, -1, &st);
            ck_assert_uint_eq(st.bytes_held, 0); /* every block freed after its last read */
        }
        stk_block_store_destroy(bs);
    }
    /* The static cache: the whole file, read once, then served from memory. */
    stk_block_store *bs;
    stk_block_store_options bo = {
        .block_records = 8, .all = false, .cache_bytes = stk_dataset_file_size(ds) + 9 * 8192};
    ck_assert_int_eq(stk_block_store_create(ds, &bo, &bs), STK_OK);
    for (uint64_t e = 0; e < 2; e++) {
        stk_block_store_stats_reset(bs, (int)(e & 1));
        store_epoch(bs, ds, &s, e);
        stk_block_store_stats st;
        stk_block_store_stats_get(bs, (int)(e & 1), &st);
        ck_assert_uint_eq(st.cached_blocks, 9);
        ck_assert_uint_eq(st.loads, e == 0 ? 9 : 0);
        ck_assert_uint_eq(st.hits, e == 0 ? 70 - 9 : 70);
        ck_assert_uint_eq(st.bytes_held, st.cache_bytes);
    }
    stk_block_store_destroy(bs);
    /* A cache smaller than a block holds nothing and serves nothing. */
    bo.cache_bytes = 100;
    ck_assert_int_eq(stk_block_store_create(ds, &bo, &bs), STK_OK);
    ck_assert(!stk_block_store_serves(bs, 0));
    stk_block_store_destroy(bs);
    bo.block_records = 0;
    ck_assert_int_eq(stk_block_store_create(ds, &bo, &bs), STK_ERR_INVALID_ARG);
    stk_sampler_deinit(&s);
    stk_dataset_close(ds);
}
END_TEST

START_TEST(block_store_short_read_is_an_error)
{
    const char *path = tpath("cut-blocks.stoke");
    stk_dataset *ds;
    stk_block_store *bs = store_over_cut_file(path, 10, 35, &ds);
    stk_read_req q[2] = {{.index = 5, .given = true}, {.index = 35, .given = true}};
    stk_block_store_acquire(bs, 0, q, 2, NULL);
    ck_assert_int_eq(q[0].status, STK_OK);
    ck_assert_int_eq(q[1].status, STK_ERR_CORRUPT);
    ck_assert_msg(strstr(q[1].error, "short read"), "%s", q[1].error);
    stk_block_store_release(bs, 0, q, 2);
    stk_block_store_destroy(bs);
    stk_dataset_close(ds);
}
END_TEST

/* Each sample's pixels are a function of (seed, epoch, record): block order
 * and the cache deliver, for every record, what the random order does. */
START_TEST(block_order_and_cache_deliver_the_same_samples)
{
    uint32_t ref[2][70];
    for (int run = 0; run < 4; run++) {
        stk_loader_options o = opts(2, STK_IO_URING);
        o.checksum = true;
        o.order = run == 1 || run == 3 ? STK_ORDER_BLOCK : STK_ORDER_RANDOM;
        o.cache_mib = run >= 2 ? 1 : 0;
        o.direct = run == 3;
        stk_loader *l;
        ck_assert_msg(stk_loader_open(jpeg_path, &o, &l) == STK_OK, "%s", stk_last_error());
        for (uint64_t e = 0; e < 2; e++) {
            ck_assert_int_eq(stk_loader_start_epoch(l, e), STK_OK);
            stk_batch *b;
            int seen = 0;
            while (stk_loader_next(l, &b) == STK_OK) {
                for (int j = 0; j < b->count; j++) {
                    uint64_t i = b->indices[j];
                    if (run == 0)
                        ref[e][i] = b->checksums[j];
                    else
                        ck_assert_msg(ref[e][i] == b->checksums[j], "run %d epoch %d record %d",
                                      run, (int)e, (int)i);
                }
                seen += b->count;
                stk_loader_release(l, b);
            }
            ck_assert_int_eq(seen, 70);
            stk_loader_stats st;
            stk_loader_stats_get(l, &st);
            if (run >= 2 && e == 1) { /* the whole file is one cached block */
                ck_assert_uint_eq(st.cache_hits, 70);
                ck_assert_uint_eq(st.block_loads, 0);
                ck_assert_uint_gt(st.cache_bytes, 0);
            }
            if (run == 1) ck_assert_uint_gt(st.block_loads + (e ? 1 : 0), 0);
        }
        stk_loader_close(l);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *plain = tcase_create("sampler");
    tcase_add_test(plain, sampler_is_an_exact_permutation_per_epoch);
    tcase_add_test(plain, sampler_block_order);
    tcase_add_test(plain, sampler_shards_evenly);
    suite_add_tcase(s, plain);
    TCase *tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, batches_identical_for_any_workers_and_backend);
    tcase_add_test(tc, next_epoch_prefetch_matches_a_fresh_start);
    tcase_add_test(tc, labels_and_indices_follow_the_sampler);
    tcase_add_test(tc, next_wait_gives_again_then_the_same_batches);
    tcase_add_loop_test(tc, position_restores_the_remaining_batches, 0, 2);
    tcase_add_test(tc, bad_record_skip_and_error);
    tcase_add_test(tc, bad_everywhere_and_transform_that_cannot_fit);
    tcase_add_test(tc, truncated_file_is_a_bad_record_not_garbage);
    tcase_add_test(tc, close_in_every_state);
    tcase_add_test(tc, edge_sizes);
    tcase_add_test(tc, direct_io_gives_the_same_batches);
    tcase_add_test(tc, block_store_reads_each_block_once_and_frees_it);
    tcase_add_test(tc, block_store_reads_a_failed_block_once_an_epoch);
    tcase_add_test(tc, block_store_short_read_is_an_error);
    tcase_add_test(tc, block_order_and_cache_deliver_the_same_samples);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
