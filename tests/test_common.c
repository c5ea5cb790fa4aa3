/* common/: status messages, CRC-32C, Philox RNG, thread pool, progress, fs helpers. */
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/fs.h"
#include "common/text.h"
#include "common/json.h"
#include "common/pb_wire.h"
#include "common/sha256.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "common/trace.h"

#include "tests/check_main.h"

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- status ---- */

static void *read_error_in_thread(void *p)
{
    *(int *)p = stk_last_error()[0] == '\0';
    return NULL;
}

START_TEST(status_message_is_per_thread)
{
    ck_assert_int_eq(stk_error(STK_ERR_IO, "%s: %d", "file.jpg", 7), STK_ERR_IO);
    ck_assert_str_eq(stk_last_error(), "file.jpg: 7");
    stk_error_prefix(STK_ERR_IO, "record %d", 3);
    ck_assert_str_eq(stk_last_error(), "record 3: file.jpg: 7");
    /* a message extended from itself (train: "...; lower --lr") */
    stk_error(STK_ERR_DIVERGED, "%s; then %s", stk_last_error(), "more");
    ck_assert_str_eq(stk_last_error(), "record 3: file.jpg: 7; then more");
    ck_assert_str_eq(stk_status_name(STK_ERR_DIVERGED), "training diverged");
    int empty = 0;
    pthread_t t;
    pthread_create(&t, NULL, read_error_in_thread, &empty);
    pthread_join(t, NULL);
    ck_assert_int_eq(empty, 1);
    stk_error_clear();
    ck_assert_str_eq(stk_last_error(), "");
    ck_assert_str_eq(stk_status_name(STK_ERR_CORRUPT), "corrupt data");
}
END_TEST

START_TEST(status_long_prefix_truncates_safely)
{
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    stk_error(STK_ERR_IO, "%s", big);
    stk_error_prefix(STK_ERR_IO, "%s", big);
    ck_assert_uint_eq(strlen(stk_last_error()), STK_ERROR_MAX - 1);
}
END_TEST

/* ---- CRC-32C: RFC 3720 appendix B.4 and the classic check value ---- */

START_TEST(crc32c_published_vectors)
{
    uint8_t buf[32];
    const char *check = "123456789";
    for (int hw = 0; hw < 2; hw++) {
        uint32_t (*crc)(uint32_t, const void *, size_t) = hw ? stk_crc32c : stk_crc32c_table;
        ck_assert_uint_eq(crc(0, check, 9), 0xE3069283u);
        memset(buf, 0, 32);
        ck_assert_uint_eq(crc(0, buf, 32), 0x8A9136AAu);
        memset(buf, 0xFF, 32);
        ck_assert_uint_eq(crc(0, buf, 32), 0x62A8AB43u);
        for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
        ck_assert_uint_eq(crc(0, buf, 32), 0x46DD794Eu);
        for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
        ck_assert_uint_eq(crc(0, buf, 32), 0x113FDB5Cu);
        ck_assert_uint_eq(crc(0, buf, 0), 0u);
    }
}
END_TEST

START_TEST(crc32c_hw_matches_table_and_chains)
{
    uint8_t data[1000];
    stk_rng r;
    stk_rng_init(&r, 1, 2, 3);
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)stk_rng_u32(&r);
    for (size_t len = 0; len < sizeof data; len += 37) {
        ck_assert_uint_eq(stk_crc32c(0, data, len), stk_crc32c_table(0, data, len));
        size_t cut = len / 3;
        uint32_t chained = stk_crc32c(stk_crc32c(0, data, cut), data + cut, len - cut);
        ck_assert_uint_eq(chained, stk_crc32c(0, data, len));
        /* unaligned start */
        ck_assert_uint_eq(stk_crc32c(0, data + 1, len ? len - 1 : 0),
                          stk_crc32c_table(0, data + 1, len ? len - 1 : 0));
    }
}
END_TEST

/* ---- Philox4x32-10: Random123's known-answer vectors ---- */

START_TEST(text_distance_and_closest)
{
    ck_assert_uint_eq(stk_text_distance("kitten", 6, "sitting"), 3);
    ck_assert_uint_eq(stk_text_distance("epoch", 5, "epochs"), 1);
    ck_assert_uint_eq(stk_text_distance("wrokers", 7, "workers"), 1); /* a swap */
    ck_assert_uint_eq(stk_text_distance("LR", 2, "lr"), 0);
    ck_assert_uint_eq(stk_text_distance("abc", 0, "abc"), 3);
    const char *flags[] = {"batch", "epochs", "lr", "workers", "label-smoothing"};
    ck_assert_str_eq(stk_text_closest("batch-size", 10, flags, 5), "batch");
    ck_assert_str_eq(stk_text_closest("epoch", 5, flags, 5), "epochs");
    ck_assert_str_eq(stk_text_closest("label-smothing", 14, flags, 5), "label-smoothing");
    ck_assert_ptr_null(stk_text_closest("frobnicate", 10, flags, 5));
    ck_assert_ptr_null(stk_text_closest("x", 1, flags, 5)); /* 2 edits from "lr": too far for 1 */
    ck_assert_ptr_null(stk_text_closest("", 0, flags, 5));
    char longer[200];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ck_assert_ptr_null(stk_text_closest(longer, strlen(longer), flags, 5));
}
END_TEST

START_TEST(philox_known_answers)
{
    static const uint32_t v[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        stk_philox4x32_10(v[i], v[i] + 4, out);
        for (int k = 0; k < 4; k++) ck_assert_uint_eq(out[k], v[i][6 + k]);
    }
}
END_TEST

START_TEST(rng_is_a_function_of_seed_stream_counter)
{
    stk_rng a, b, c;
    stk_rng_init(&a, 42, 7, 1000);
    stk_rng_init(&b, 42, 7, 1000);
    stk_rng_init(&c, 42, 8, 1000);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t x = stk_rng_u32(&a);
        ck_assert_uint_eq(x, stk_rng_u32(&b));
        differ += x != stk_rng_u32(&c);
    }
    ck_assert_int_gt(differ, 95);
    /* The first word equals the Philox block of (counter, stream) under key seed. */
    uint32_t ctr[4] = {1000, 0, 7, 0}, key[2] = {42, 0}, out[4];
    stk_philox4x32_10(ctr, key, out);
    stk_rng_init(&a, 42, 7, 1000);
    ck_assert_uint_eq(stk_rng_u32(&a), out[0]);
}
END_TEST

START_TEST(rng_ranges)
{
    stk_rng r;
    stk_rng_init(&r, 5, 0, 0);
    int hist[10] = {0};
    for (int i = 0; i < 100000; i++) {
        uint32_t k = stk_rng_below(&r, 10);
        ck_assert_uint_lt(k, 10);
        hist[k]++;
        double u = stk_rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        ck_assert_uint_lt(stk_rng_below64(&r, 5000000000ull), 5000000000ull);
    }
    /* Fixed seed, so this is deterministic; 10% is ~30 standard deviations. */
    for (int k = 0; k < 10; k++) ck_assert(hist[k] > 9000 && hist[k] < 11000);
    ck_assert_uint_eq(stk_rng_below(&r, 1), 0);
}
END_TEST

/* ---- thread pool ---- */

typedef struct pool_ctx {
    int *visits;
    int threads;
    int bad_worker;
} pool_ctx;

static void visit(void *p, size_t i, int worker)
{
    pool_ctx *c = p;
    __atomic_fetch_add(&c->visits[i], 1, __ATOMIC_RELAXED);
    if (worker < 0 || worker >= c->threads) __atomic_store_n(&c->bad_worker, 1, __ATOMIC_RELAXED);
}

START_TEST(pool_visits_every_index_once)
{
    for (int threads = 1; threads <= 4; threads++) {
        stk_pool *pool;
        ck_assert_int_eq(stk_pool_create(threads, &pool), STK_OK);
        ck_assert_int_eq(stk_pool_size(pool), threads);
        for (size_t n = 0; n < 2000; n = n * 3 + 1) {
            pool_ctx c = {calloc(n + 1, sizeof(int)), threads, 0};
            stk_pool_parallel_for(pool, n, visit, &c);
            for (size_t i = 0; i < n; i++) ck_assert_int_eq(c.visits[i], 1);
            ck_assert_int_eq(c.bad_worker, 0);
            free(c.visits);
        }
        stk_pool_destroy(pool);
    }
}
END_TEST

START_TEST(pool_many_small_jobs)
{
    stk_pool *pool;
    ck_assert_int_eq(stk_pool_create(3, &pool), STK_OK);
    int visits[8];
    for (int job = 0; job < 3000; job++) {
        memset(visits, 0, sizeof visits);
        pool_ctx c = {visits, 3, 0};
        stk_pool_parallel_for(pool, 8, visit, &c);
        for (int i = 0; i < 8; i++) ck_assert_int_eq(visits[i], 1);
    }
    stk_pool_destroy(pool);
    stk_pool_destroy(NULL);
}
END_TEST

START_TEST(pool_rejects_bad_sizes)
{
    stk_pool *pool = (stk_pool *)1;
    ck_assert_int_eq(stk_pool_create(0, &pool), STK_ERR_INVALID_ARG);
    ck_assert_ptr_null(pool);
    ck_assert(strstr(stk_last_error(), "0 threads"));
    ck_assert_int_ge(stk_cpu_count(), 1);
}
END_TEST

/* ---- progress ---- */

START_TEST(progress_plain_lines)
{
    FILE *f = tmpfile();
    setenv("STOKE_PROGRESS", "plain", 1);
    stk_progress p;
    stk_progress_init(&p, "pack", 10, f);
    p.plain_interval = 0; /* draw on every update */
    stk_progress_update(&p, 4);
    stk_progress_set_extra(&p, "loss 0.5");
    stk_progress_finish(&p);
    unsetenv("STOKE_PROGRESS");
    rewind(f);
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert(strncmp(line, "pack: 4/10 (40%)", 16) == 0);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert(strncmp(line, "pack: 10/10 (100%)", 18) == 0 || strncmp(line, "pack: 4/10", 10) == 0);
    ck_assert(strstr(line, "loss 0.5"));
    ck_assert(strchr(line, '\r') == NULL);
    fclose(f);
    char buf[32];
    stk_format_duration(3725, buf, sizeof buf);
    ck_assert_str_eq(buf, "1:02:05");
    stk_format_duration(65, buf, sizeof buf);
    ck_assert_str_eq(buf, "1:05");
    stk_format_duration(-1, buf, sizeof buf);
    ck_assert_str_eq(buf, "--:--");
}
END_TEST

START_TEST(progress_tty_redraws_one_line)
{
    FILE *f = tmpfile();
    setenv("STOKE_PROGRESS", "tty", 1);
    stk_progress p;
    stk_progress_init(&p, "verify", 100, f);
    stk_progress_finish(&p);
    unsetenv("STOKE_PROGRESS");
    rewind(f);
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_int_eq(line[0], '\r');
    ck_assert(strstr(line, "\033[K"));
    fclose(f);
}
END_TEST

/* ---- fs ---- */

START_TEST(utf8_validation)
{
    ck_assert(stk_utf8_valid("caf\xC3\xA9/\xE2\x82\xAC.jpg", 12));
    ck_assert(stk_utf8_valid("", 0));
    ck_assert(!stk_utf8_valid("\xFF", 1));
    ck_assert(!stk_utf8_valid("\xC3", 1));         /* truncated */
    ck_assert(!stk_utf8_valid("\xC0\xAF", 2));     /* overlong '/' */
    ck_assert(!stk_utf8_valid("\xED\xA0\x80", 3)); /* surrogate */
    ck_assert(!stk_utf8_valid("a\xE2\x82", 3));
    char buf[64];
    ck_assert_str_eq(stk_printable("bad\xFFname\n", buf, sizeof buf), "bad\\xFFname\\x0A");
    ck_assert_str_eq(stk_printable("caf\xC3\xA9", buf, sizeof buf), "caf\xC3\xA9");
}
END_TEST

START_TEST(read_all_refuses_fifo_without_blocking)
{
    const char *dir = getenv("STOKE_TEST_TMP") ? getenv("STOKE_TEST_TMP") : "/tmp";
    char path[512];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/fifo.jpg", dir);
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0644), 0);
    uint8_t *data;
    size_t len;
    ck_assert_int_eq(stk_file_read_all(path, 1000, &data, &len), STK_ERR_UNSUPPORTED);
    ck_assert(strstr(stk_last_error(), "FIFO"));
    unlink(path);
    ck_assert_int_eq(stk_file_read_all(path, 1000, &data, &len), STK_ERR_IO);
    ck_assert(strstr(stk_last_error(), "No such file"));
    snprintf(path, sizeof path, "%s/small.bin", dir);
    FILE *f = fopen(path, "w");
    fputs("0123456789", f);
    fclose(f);
    ck_assert_int_eq(stk_file_read_all(path, 5, &data, &len), STK_ERR_LIMIT);
    ck_assert_int_eq(stk_file_read_all(path, 10, &data, &len), STK_OK);
    ck_assert_uint_eq(len, 10);
    ck_assert(memcmp(data, "0123456789", 10) == 0);
    free(data);
}
END_TEST

START_TEST(write_atomic_keeps_links_and_devices)
{
    const char *dir = getenv("STOKE_TEST_TMP") ? getenv("STOKE_TEST_TMP") : "/tmp";
    char real[512], link[512], dangling[512], fifo[512], null_link[512];
    mkdir(dir, 0755);
    snprintf(real, sizeof real, "%s/atomic_real.txt", dir);
    snprintf(link, sizeof link, "%s/atomic_link.txt", dir);
    snprintf(dangling, sizeof dangling, "%s/atomic_dangling.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/atomic_fifo", dir);
    snprintf(null_link, sizeof null_link, "%s/atomic_null", dir);
    unlink(real), unlink(link), unlink(dangling), unlink(fifo), unlink(null_link);
    stk_file_part part = {"new", 3};
    /* A link given as the output: its target gets the content, the link stays. */
    ck_assert_int_eq(symlink("atomic_real.txt", link), 0);
    ck_assert_int_eq(stk_file_write_atomic(link, &part, 1), STK_OK);
    struct stat sb;
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    uint8_t *data;
    size_t len;
    ck_assert_int_eq(stk_file_read_all(real, 100, &data, &len), STK_OK);
    ck_assert(len == 3 && memcmp(data, "new", 3) == 0);
    free(data);
    /* A link to /dev/null: written through, still a link, /dev/null still a device. */
    ck_assert_int_eq(symlink("/dev/null", null_link), 0);
    ck_assert_int_eq(stk_file_write_atomic(null_link, &part, 1), STK_OK);
    ck_assert_int_eq(lstat(null_link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_int_eq(stat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    ck_assert_int_eq(stk_file_write_atomic("/dev/null", &part, 1), STK_OK);
    ck_assert_int_eq(stat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    /* A FIFO nobody reads is refused at once, not waited on, and stays a FIFO. */
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    ck_assert_int_eq(stk_file_write_atomic(fifo, &part, 1), STK_ERR_IO);
    ck_assert(strstr(stk_last_error(), "no reader"));
    ck_assert_int_eq(lstat(fifo, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    /* A directory is refused by name. */
    ck_assert_int_eq(stk_file_write_atomic(dir, &part, 1), STK_ERR_UNSUPPORTED);
    ck_assert(strstr(stk_last_error(), "a directory"));
    /* A dangling link creates its target. */
    ck_assert_int_eq(symlink("atomic_made.txt", dangling), 0);
    ck_assert_int_eq(stk_file_write_atomic(dangling, &part, 1), STK_OK);
    snprintf(real, sizeof real, "%s/atomic_made.txt", dir);
    ck_assert_int_eq(lstat(real, &sb), 0);
    ck_assert(S_ISREG(sb.st_mode) && sb.st_size == 3);
    ck_assert_int_eq(lstat(dangling, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    unlink(real), unlink(link), unlink(dangling), unlink(fifo), unlink(null_link);
}
END_TEST

START_TEST(log_levels_and_clock)
{
    ck_assert_int_eq(stk_log_parse_level("debug"), STK_LOG_DEBUG);
    ck_assert_int_eq(stk_log_parse_level("warn"), STK_LOG_WARN);
    ck_assert_int_eq(stk_log_parse_level("loud"), -1);
    stk_log_set_level(STK_LOG_ERROR);
    ck_assert_int_eq(stk_log_get_level(), STK_LOG_ERROR);
    stk_log_set_level(STK_LOG_INFO);
    uint64_t a = stk_clock_ns(), b = stk_clock_ns();
    ck_assert_uint_ge(b, a);
}
END_TEST

/* ---- trace ---- */

static void *traced_thread(void *p)
{
    (void)p;
    stk_trace_thread_name("helper");
    stk_trace_begin("outer", "t");
    stk_trace_flow('s', 7); /* finished on the main thread */
    stk_trace_flow('s', 8); /* never finished: left out */
    stk_trace_async_begin("read", "io", 1);
    stk_trace_async_begin("read", "io", 2); /* never ended: left out */
    stk_trace_begin_args("inner", "t",
                         "a \"quoted\" argument that is longer than forty-seven bytes");
    stk_trace_end();
    stk_trace_async_end("read", "io", 1);
    stk_trace_end();
    return NULL;
}

static char *read_text(const char *path)
{
    uint8_t *data;
    size_t len;
    ck_assert_int_eq(stk_file_read_all(path, 1 << 24, &data, &len), STK_OK);
    char *t = realloc(data, len + 1);
    t[len] = '\0';
    return t;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) n++;
    return n;
}

START_TEST(trace_records_threads_flows_and_the_schedule)
{
    char path[] = "/tmp/stoke-trace-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert(!stk_trace_enabled());
    stk_trace_begin("before", "t"); /* off: nothing, and no harm */
    stk_trace_end();
    stk_trace_options o = {.wait_steps = 1, .active_steps = 2};
    ck_assert_int_eq(stk_trace_start(&o), STK_OK);
    ck_assert_int_eq(stk_trace_start(&o), STK_ERR_INVALID_ARG);
    for (int step = 0; step < 5; step++) { /* steps 1 and 2 recorded */
        stk_trace_step();
        stk_trace_begin("step", "t");
        stk_trace_counter("n", step);
        if (step == 1) {
            pthread_t t;
            pthread_create(&t, NULL, traced_thread, NULL);
            pthread_join(t, NULL);
        }
        if (step == 2) stk_trace_flow('f', 7);
        stk_trace_end();
    }
    stk_trace_summary sum;
    ck_assert_int_eq(stk_trace_finish(path, &sum), STK_OK);
    ck_assert(!stk_trace_enabled());
    char *t = read_text(path);
    ck_assert_int_eq(count(t, "\"name\":\"step\""), 2);
    ck_assert_int_eq(count(t, "\"ph\":\"C\""), 2);
    ck_assert_int_eq(count(t, "\"ph\":\"s\""), 1);
    ck_assert_int_eq(count(t, "\"ph\":\"f\","), 1);
    ck_assert_int_eq(count(t, "\"id\":8"), 0);
    ck_assert_int_eq(count(t, "\"ph\":\"b\""), 1);
    ck_assert_int_eq(count(t, "\"ph\":\"e\""), 1);
    ck_assert_ptr_nonnull(strstr(t, "\"thread_name\",\"args\":{\"name\":\"helper\"}"));
    ck_assert_ptr_nonnull(strstr(
        t, "\"info\":\"a \\\"quoted\\\" argument that is longer than forty-s\"")); /* 47 bytes */
    ck_assert_ptr_null(strstr(t, "before"));
    ck_assert_uint_eq(sum.dropped, 0);
    ck_assert_uint_ge(sum.threads, 2);
    free(t);
    /* an unwritable file: the error names it, the trace is off */
    ck_assert_int_eq(stk_trace_start(&o), STK_OK);
    ck_assert_int_eq(stk_trace_finish("/nonexistent/t.json", &sum), STK_ERR_IO);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "--trace /nonexistent/t.json: No such file"));
    ck_assert(!stk_trace_enabled());
    unlink(path);
}
END_TEST

/* JSON output is always JSON: no NaN or inf numbers, no bytes that are not UTF-8. */
START_TEST(json_numbers_and_strings_stay_json)
{
    /* FNV-1a 64 published vectors ("" and "a"), chained like the CRC */
    ck_assert_uint_eq(stk_fnv1a64(STK_FNV1A64_BASIS, "", 0), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(stk_fnv1a64(STK_FNV1A64_BASIS, "a", 1), 0xaf63dc4c8601ec8cull);
    ck_assert_uint_eq(stk_fnv1a64(stk_fnv1a64(STK_FNV1A64_BASIS, "fo", 2), "o", 1),
                      stk_fnv1a64(STK_FNV1A64_BASIS, "foo", 3));
    char b[STK_JSON_NUMBER];
    ck_assert_str_eq(stk_json_number(1.5, 2, b), "1.50");
    ck_assert_str_eq(stk_json_number(NAN, 2, b), "null");
    ck_assert_str_eq(stk_json_number(-INFINITY, 2, b), "null");
    ck_assert_uint_gt(strlen(stk_json_number(-1.7976931348623157e308, 6, b)), 300);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    stk_json_write_string(f, "caf\xc3\xa9 c\xe4t \xe2\x82 \"q\"\n");
    fclose(f);
    ck_assert_str_eq(text, "\"caf\xc3\xa9 c\\ufffdt \\ufffd\\ufffd \\\"q\\\"\\n\"");
    free(text);
    /* the lock: a second holder is refused, naming this process */
    char dir[] = "/tmp/stoke-lock-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int fd, fd2;
    ck_assert_int_eq(stk_dir_lock(dir, &fd), STK_OK);
    ck_assert_int_eq(stk_dir_lock(dir, &fd2), STK_ERR_BUSY);
    char pid[32];
    snprintf(pid, sizeof pid, "by pid %ld (", (long)getpid());
    ck_assert_ptr_nonnull(strstr(stk_last_error(), pid));
    close(fd);
    ck_assert_int_eq(stk_dir_lock(dir, &fd2), STK_OK);
    close(fd2);
    rmdir(dir);
}
END_TEST

/* FIPS 180-2's examples, and a message that spans the padding boundary. */
START_TEST(sha256_published_vectors)
{
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        stk_sha256 s;
        stk_sha256_init(&s);
        /* in pieces of 1..3 bytes: the result must not depend on how it is fed */
        for (size_t at = 0, len = strlen(v[i].msg); at < len; at += 1 + at % 3)
            stk_sha256_update(&s, v[i].msg + at, len - at < 1 + at % 3 ? len - at : 1 + at % 3);
        uint8_t d[32];
        stk_sha256_final(&s, d);
        char hex[65];
        for (int j = 0; j < 32; j++) snprintf(hex + 2 * j, 3, "%02x", d[j]);
        ck_assert_str_eq(hex, v[i].hex);
    }
    /* a million 'a's, through a file */
    char path[] = "/tmp/stoke-sha-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    ck_assert_int_eq(write(fd, a, 1000000), 1000000);
    close(fd);
    free(a);
    char hex[65];
    ck_assert_int_eq(stk_sha256_file(path, hex), STK_OK);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    unlink(path);
    ck_assert_int_eq(stk_sha256_file(path, hex), STK_ERR_IO);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), path));
}
END_TEST

/* A list of names through a JSON array and back (escapes, UTF-8, \u and
 * surrogate pairs); what is not such an array is refused. */
START_TEST(json_string_arrays)
{
    char *names[] = {"T-shirt/top", "say \"hi\"\\", "caf\xc3\xa9", "tab\there", ""};
    char *text = stk_json_string_array(names, 5);
    ck_assert_ptr_nonnull(text);
    char **back;
    int n;
    ck_assert(stk_json_parse_string_array(text, 10, &back, &n));
    ck_assert_int_eq(n, 5);
    for (int i = 0; i < 5; i++) ck_assert_str_eq(back[i], names[i]);
    stk_json_strings_free(back, n);
    free(text);
    ck_assert(stk_json_parse_string_array(" [ \"\\u00e9\\ud83d\\ude00\\/\" ] ", 10, &back, &n));
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(back[0], "\xc3\xa9\xf0\x9f\x98\x80/");
    stk_json_strings_free(back, n);
    ck_assert(stk_json_parse_string_array("[]", 10, &back, &n) && n == 0);
    const char *bad[] = {"",
                         "[",
                         "[\"a\"",
                         "[\"a\",]",
                         "[1]",
                         "[\"a\"] x",
                         "{\"a\": 1}",
                         "[\"\\u0000\"]",
                         "[\"\\ud800\"]",
                         "[\"\\q\"]",
                         "[\"a\", \"b\", \"c\"]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(!stk_json_parse_string_array(bad[i], 2, &back, &n), "%s", bad[i]);
        ck_assert(back == NULL && n == 0);
    }
}
END_TEST

static void assert_bytes(const stk_pb *b, const uint8_t *want, size_t n)
{
    ck_assert(!stk_pb_failed(b));
    ck_assert_uint_eq(b->len, n);
    ck_assert_mem_eq(b->data, want, n);
}

/* The encodings of protobuf's documentation ("Encoding": 150 in field 1 is
 * 08 96 01; "testing" in field 2 is 12 07 74 65 73 74 69 6e 67; a message
 * holding field 1 = 150 in field 3 is 1a 03 08 96 01). */
START_TEST(pb_wire_matches_protobuf_docs)
{
    stk_pb b;
    stk_pb_init(&b);
    stk_pb_int(&b, 1, 150);
    assert_bytes(&b, (const uint8_t[]){0x08, 0x96, 0x01}, 3);
    stk_pb_reset(&b);
    stk_pb_string(&b, 2, "testing");
    assert_bytes(&b, (const uint8_t[]){0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}, 9);
    stk_pb_reset(&b);
    size_t m = stk_pb_begin(&b, 3);
    stk_pb_int(&b, 1, 150);
    stk_pb_end(&b, m);
    assert_bytes(&b, (const uint8_t[]){0x1a, 0x03, 0x08, 0x96, 0x01}, 5);
    /* negative int64: ten bytes; double and float little-endian */
    stk_pb_reset(&b);
    stk_pb_int(&b, 2, -1);
    assert_bytes(
        &b, (const uint8_t[]){0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
        11);
    stk_pb_reset(&b);
    stk_pb_double(&b, 1, 1.0);
    stk_pb_float(&b, 2, 1.0f);
    assert_bytes(&b, (const uint8_t[]){0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x15, 0, 0, 0x80, 0x3f},
                 14);
    stk_pb_deinit(&b);
}
END_TEST

/* A nested body longer than 127 bytes needs a 2-byte length: the body moves. */
START_TEST(pb_wire_long_nested_message)
{
    stk_pb b;
    stk_pb_init(&b);
    char text[300];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    size_t outer = stk_pb_begin(&b, 5);
    size_t inner = stk_pb_begin(&b, 1);
    stk_pb_string(&b, 1, text);
    stk_pb_end(&b, inner);
    stk_pb_end(&b, outer);
    ck_assert(!stk_pb_failed(&b));
    /* 2a <len 305: b1 02> 0a <len 302: ae 02> 0a <len 299: ab 02> x... */
    const uint8_t head[] = {0x2a, 0xb1, 0x02, 0x0a, 0xae, 0x02, 0x0a, 0xab, 0x02, 'x'};
    ck_assert_uint_eq(b.len, 9 + 299);
    ck_assert_mem_eq(b.data, head, sizeof head);
    ck_assert_int_eq(b.data[b.len - 1], 'x');
    stk_pb_deinit(&b);
}
END_TEST

START_TEST(strbuf_appends_and_grows)
{
    stk_strbuf b = {0};
    for (int i = 0; i < 1000; i++) stk_strbuf_printf(&b, "%s%d", i ? "," : "", i);
    ck_assert(!b.failed);
    ck_assert_uint_eq(b.len, strlen(b.s));
    ck_assert(!strncmp(b.s, "0,1,2,", 6));
    ck_assert_str_eq(b.s + b.len - 4, ",999");
    free(b.s);
}
END_TEST

int main(void)
{

    Suite *s = suite_create("common");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, status_message_is_per_thread);
    tcase_add_test(tc, status_long_prefix_truncates_safely);
    tcase_add_test(tc, crc32c_published_vectors);
    tcase_add_test(tc, strbuf_appends_and_grows);
    tcase_add_test(tc, sha256_published_vectors);
    tcase_add_test(tc, json_string_arrays);
    tcase_add_test(tc, pb_wire_matches_protobuf_docs);
    tcase_add_test(tc, pb_wire_long_nested_message);
    tcase_add_test(tc, crc32c_hw_matches_table_and_chains);
    tcase_add_test(tc, philox_known_answers);
    tcase_add_test(tc, text_distance_and_closest);
    tcase_add_test(tc, rng_is_a_function_of_seed_stream_counter);
    tcase_add_test(tc, rng_ranges);
    tcase_add_test(tc, pool_visits_every_index_once);
    tcase_add_test(tc, pool_many_small_jobs);
    tcase_add_test(tc, pool_rejects_bad_sizes);
    tcase_add_test(tc, progress_plain_lines);
    tcase_add_test(tc, progress_tty_redraws_one_line);
    tcase_add_test(tc, utf8_validation);
    tcase_add_test(tc, read_all_refuses_fifo_without_blocking);
    tcase_add_test(tc, write_atomic_keeps_links_and_devices);
    tcase_add_test(tc, log_levels_and_clock);
    tcase_add_test(tc, trace_records_threads_flows_and_the_schedule);
    tcase_add_test(tc, json_numbers_and_strings_stay_json);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
