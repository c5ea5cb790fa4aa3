/* stoke verify: check every record of a dataset. */
#include "common/fs.h"
#include "common/json.h"
#include "common/progress.h"
#include "common/text.h"
#include "common/thread_pool.h"
#include "decode/jpeg_decoder.h"
#include "storage/dataset.h"
#include "storage/record_index.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct verify_args {
    bool decode, json;
    int64_t workers;
} verify_args;

static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_BOOL(verify_args, decode, "decode", "decode every JPEG record completely"),
    STK_FLAG_WORKERS(verify_args, workers,
                     "threads decoding with --decode (default: number of cores)"),
    STK_FLAG_JSON(verify_args, json,
                  "one JSON object on stdout: path, records, bad, good, decode,\n"
                  "bad_records (the first 100: index, name, reason),\n"
                  "class_mismatches (class, name, counted, meta), index (present, ok,\n"
                  "problem)"),
    STK_FLAG_END};

static const stk_cli cli = {
    .cmd = "verify",
    .usage = "stoke verify [--decode] [--json] [--workers N] DATA.stoke",
    .about = "Check every record: its header, its CRC-32C (format 2: over header, name and\n"
             "payload; format 1: name and payload), its label, encoding and size against the\n"
             "meta, and the per-class counts against the meta. With --decode, also decode\n"
             "every JPEG completely and check its size against the header. The records are\n"
             "read through the LMDB tree, and the file's record index (stoke index), when it\n"
             "has one, is checked against it: every record's place, length, CRC and label.\n"
             "Exit status 0 when every record is good; 1 with one line per bad record\n"
             "(\"FILE: record INDEX (SOURCE NAME): reason\") otherwise.\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected one DATA.stoke",
    .first_arg_names = (const char *const[]){"data", NULL}};

#define CHUNK      1024
#define MAX_LISTED 100

typedef struct job {
    stk_record rec;
    stk_status status;
    char *error;
    bool decoded; /* the error is the decoder's: the record is not named in it yet */
} job;

typedef struct decode_ctx {
    job *jobs;
    stk_jpeg_decoder **dec;
} decode_ctx;

/* A bad record kept for the report (the first MAX_LISTED). */
typedef struct listed {
    uint64_t index;
    char *name;   /* the source name, when the header could be read */
    char *reason; /* the message (naming file and record unless from the decoder) */
} listed;

static void decode_one(void *p, size_t i, int worker)
{
    decode_ctx *ctx = p;
    job *j = &ctx->jobs[i];
    if (j->status != STK_OK || j->rec.encoding != STK_ENCODING_JPEG) return;
    stk_jpeg_info info;
    stk_status st = stk_jpeg_decoder_validate(ctx->dec[worker], j->rec.payload, j->rec.payload_len,
                                              &info, NULL);
    if (st == STK_OK && (info.width != j->rec.width || info.height != j->rec.height))
        st = stk_error(STK_ERR_CORRUPT, "JPEG is %ux%u but the header says %ux%u", info.width,
                       info.height, j->rec.width, j->rec.height);
    if (st == STK_OK && (info.components == 1 ? 1 : 3) != j->rec.channels)
        st = stk_error(STK_ERR_CORRUPT, "JPEG has %d components but the header says %u",
                       info.components, j->rec.channels);
    if (st != STK_OK) {
        j->status = st;
        j->error = strdup(stk_last_error());
        j->decoded = true;
    }
}

/* The file's record index against the records read through the tree: 1
 * none, 0 it agrees, -1 it does not (why says how). */
static int check_index(stk_dataset *walked, char *why, size_t n)
{
    if (stk_dataset_file_count(walked) > 1) { /* shards: each file's own index */
        int rc = 0;
        for (int k = 0; k < stk_dataset_file_count(walked) && rc >= 0; k++) {
            stk_dataset *part;
            if (stk_dataset_open_walk(stk_dataset_file_path(walked, k), &part) != STK_OK) {
                snprintf(why, n, "%s", stk_last_error());
                return -1;
            }
            int r = check_index(part, why, n);
            stk_dataset_close(part);
            if (r != 0) rc = r; /* -1 wins; else 1: a shard without one */
        }
        return rc;
    }
    stk_index_entry *e;
    stk_status st = stk_dataset_read_index(walked, &e);
    if (st == STK_END) return 1;
    if (st != STK_OK) {
        snprintf(why, n, "%s", stk_last_error());
        return -1;
    }
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < stk_dataset_count(walked); i++) {
        uint64_t off;
        uint32_t len;
        stk_record r;
        if (stk_dataset_span(walked, i, &off, &len) != STK_OK ||
            stk_dataset_get(walked, i, &r, false) != STK_OK)
            continue; /* a bad record: listed by the main check */
        if (e[i].offset != off || e[i].length != len || e[i].crc != r.crc ||
            e[i].label != r.label) {
            snprintf(why, n,
                     "%s: record index: record %" PRIu64 " is at %" PRIu64 " (%u bytes, crc %08x, "
                     "label %d) in the index, at %" PRIu64 " (%u bytes, crc %08x, label %d) in "
                     "the file",
                     stk_dataset_path(walked), i, e[i].offset, e[i].length, e[i].crc, e[i].label,
                     off, len, r.crc, r.label);
            rc = -1;
        }
    }
    free(e);
    return rc;
}

static void report_text(const char *path, const stk_meta *m, const uint64_t *counts,
                        const listed *list, uint64_t bad, uint64_t mismatched, bool decode)
{
    for (uint64_t i = 0; i < bad && i < MAX_LISTED; i++) {
        if (list[i].name)
            printf("%s: record %" PRIu64 " (%s): %s\n", path, list[i].index, list[i].name,
                   list[i].reason);
        else
            printf("%s\n", list[i].reason);
    }
    for (uint32_t c = 0; mismatched && c < m->num_classes; c++)
        if (counts[c] != m->class_counts[c])
            printf("class %u (%s): %" PRIu64 " records, the meta says %" PRIu64 "\n", c,
                   m->class_names[c], counts[c], m->class_counts[c]);
    if (bad > MAX_LISTED) printf("... and %" PRIu64 " more\n", bad - MAX_LISTED);
    if (bad || mismatched)
        printf("%s: %" PRIu64 " of %" PRIu64 " records are bad%s\n", path, bad, m->count,
               mismatched ? "; class counts disagree with the meta" : "");
    else
        printf("%s: all %" PRIu64 " records are good (header, CRC, label%s)\n", path, m->count,
               decode ? ", full decode" : "");
}

static void report_json(const char *path, const stk_meta *m, const uint64_t *counts,
                        const listed *list, uint64_t bad, uint64_t mismatched, bool decode)
{
    printf("{\"path\": ");
    stk_json_write_string(stdout, path);
    printf(", \"records\": %" PRIu64 ", \"bad\": %" PRIu64 ", \"good\": %s, \"decode\": %s, "
           "\"bad_records\": [",
           m->count, bad, bad || mismatched ? "false" : "true", decode ? "true" : "false");
    for (uint64_t i = 0; i < bad && i < MAX_LISTED; i++) {
        printf("%s{\"index\": %" PRIu64 ", \"name\": ", i ? ", " : "", list[i].index);
        if (list[i].name)
            stk_json_write_string(stdout, list[i].name);
        else
            printf("null");
        printf(", \"reason\": ");
        stk_json_write_string(stdout, list[i].reason);
        printf("}");
    }
    printf("], \"class_mismatches\": [");
    int k = 0;
    for (uint32_t c = 0; mismatched && c < m->num_classes; c++)
        if (counts[c] != m->class_counts[c]) {
            printf("%s{\"class\": %u, \"name\": ", k++ ? ", " : "", c);
            stk_json_write_string(stdout, m->class_names[c]);
            printf(", \"counted\": %" PRIu64 ", \"meta\": %" PRIu64 "}", counts[c],
                   m->class_counts[c]);
        }
    printf("]");
}

static int verify_main(int argc, char **argv)
{
    verify_args a = {.workers = stk_cpu_count()};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    bool decode = a.decode;
    int64_t workers = a.workers;
    const char *path = pos[0];
    stk_dataset *ds;
    /* the records through the tree: the index, if any, is checked against them */
    if (stk_dataset_open_walk(path, &ds) != STK_OK) return stk_cli_fail();
    const stk_meta *m = stk_dataset_meta(ds);
    int rc = STK_EXIT_ERROR;
    stk_pool *pool = NULL;
    decode_ctx ctx = {0};
    uint64_t *counts = calloc(m->num_classes ? m->num_classes : 1, sizeof *counts);
    uint64_t bad = 0;
    listed *list = calloc(MAX_LISTED, sizeof *list);
    ctx.jobs = calloc(CHUNK, sizeof *ctx.jobs);
    ctx.dec = calloc((size_t)workers, sizeof *ctx.dec);
    if (!counts || !list || !ctx.jobs || !ctx.dec) {
        stk_error(STK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (decode) {
        if (stk_pool_create((int)workers, &pool) != STK_OK) goto fail;
        for (int i = 0; i < workers; i++)
            if (stk_jpeg_decoder_create((uint64_t)1 << 36, &ctx.dec[i]) != STK_OK) goto fail;
    }
    stk_cli_catch_interrupt();
    stk_progress bar;
    stk_progress_init(&bar, "verify", m->count, stderr);
    for (uint64_t first = 0; first < m->count; first += CHUNK) {
        if (stk_cli_interrupted) {
            stk_error(STK_ERR_CANCELLED, "verify interrupted after %" PRIu64 " records", first);
            goto fail;
        }
        size_t n = m->count - first < CHUNK ? (size_t)(m->count - first) : CHUNK;
        for (size_t i = 0; i < n; i++) {
            job *j = &ctx.jobs[i];
            /* get() checks the header, CRC, encoding and label against the meta,
             * and names the file and record in its message. */
            j->status = stk_dataset_get(ds, first + i, &j->rec, true);
            if (j->status != STK_OK)
                j->error = strdup(stk_last_error());
            else
                counts[j->rec.label]++;
        }
        if (decode) stk_pool_parallel_for(pool, n, decode_one, &ctx);
        for (size_t i = 0; i < n; i++) {
            job *j = &ctx.jobs[i];
            if (j->status != STK_OK && ++bad <= MAX_LISTED) {
                listed *l = &list[bad - 1];
                l->index = first + i;
                if (j->decoded) /* get() succeeded: the name is valid */
                    l->name = stk_text_printf("%.*s", (int)j->rec.name_len, j->rec.name);
                l->reason = j->error ? j->error : strdup("out of memory");
                j->error = NULL;
            }
            free(j->error);
            memset(j, 0, sizeof *j);
        }
        stk_progress_update(&bar, first + n);
    }
    stk_progress_finish(&bar);
    /* With bad records the counts are off by them; otherwise they must match. */
    uint64_t mismatched = 0;
    for (uint32_t c = 0; bad == 0 && c < m->num_classes; c++)
        mismatched += counts[c] != m->class_counts[c];
    char why[512] = "";
    int index = check_index(ds, why, sizeof why);
    if (a.json) {
        report_json(path, m, counts, list, bad, mismatched, decode);
        printf(", \"index\": {\"present\": %s, \"ok\": %s, \"problem\": ",
               index == 1 ? "false" : "true", index == 0 ? "true" : "false");
        if (index < 0)
            stk_json_write_string(stdout, why);
        else
            printf("null");
        printf("}}\n");
    } else {
        report_text(path, m, counts, list, bad, mismatched, decode);
        if (index < 0)
            printf("%s\n", why);
        else if (index == 0)
            printf("%s: its record index agrees with the records\n", path);
        else
            printf("%s: no record index (`stoke index %s` adds one)\n", path, path);
    }
    rc = bad || mismatched || index < 0 ? STK_EXIT_ERROR : STK_EXIT_OK;
    goto out;
fail:
    rc = stk_cli_fail();
out:
    for (int i = 0; ctx.dec && i < workers; i++) stk_jpeg_decoder_destroy(ctx.dec[i]);
    free(ctx.dec);
    free(ctx.jobs);
    free(counts);
    for (uint64_t i = 0; list && i < bad && i < MAX_LISTED; i++)
        free(list[i].name), free(list[i].reason);
    free(list);
    stk_pool_destroy(pool);
    stk_dataset_close(ds);
    return rc;
}

const stk_command stk_cmd_verify = {"verify", "check every record of a .stoke dataset", &cli,
                                    verify_main};
