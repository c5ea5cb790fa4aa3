/* stoke index: write a dataset's record index (storage/record_index.h) in place. */
#include "common/json.h"
#include "storage/dataset.h"
#include "storage/index_writer.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct index_args {
    bool json;
} index_args;

static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_JSON(index_args, json, "one JSON object on stdout (keys: path, records, indexed)"),
    STK_FLAG_END};

static const stk_cli cli = {
    .cmd = "index",
    .usage = "stoke index DATA.stoke",
    .about = "Write the record index into a dataset file, in place: each record's place,\n"
             "length, CRC and label, bound to the file's last LMDB transaction, so that\n"
             "opening the file reads the index in a few large reads instead of every\n"
             "record page (stoke pack writes it; files packed before it existed, or whose\n"
             "index no longer matches them, open by reading every page, with a hint).\n"
             "The records are read and checked first; the index is added in one LMDB\n"
             "commit: the file is complete with it or as it was. stoke verify checks it.\n"
             "Given shards (a list file or a,b,...), each file gets its own.\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected one DATA.stoke",
    .first_arg_names = (const char *const[]){"data", NULL}};

static int index_main(int argc, char **argv)
{
    index_args a = {0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    stk_dataset *ds; /* its files: one, or each shard */
    if (stk_dataset_open(pos[0], &ds) != STK_OK) return stk_cli_fail();
    int files = stk_dataset_file_count(ds);
    char **paths = calloc((size_t)files, sizeof *paths);
    for (int k = 0; paths && k < files; k++) paths[k] = strdup(stk_dataset_file_path(ds, k));
    stk_dataset_close(ds);
    stk_status st = paths ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; st == STK_OK && k < files; k++)
        st = paths[k] ? stk_record_index_add(paths[k]) : stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; paths && k < files; k++) free(paths[k]);
    free(paths);
    if (st != STK_OK) return stk_cli_fail();
    /* opened again: through the new index */
    if (stk_dataset_open(pos[0], &ds) != STK_OK) return stk_cli_fail();
    uint64_t n = stk_dataset_count(ds);
    bool indexed = stk_dataset_indexed(ds);
    stk_dataset_close(ds);
    if (a.json) {
        printf("{\"path\": ");
        stk_json_write_string(stdout, pos[0]);
        printf(", \"records\": %" PRIu64 ", \"indexed\": %s}\n", n, indexed ? "true" : "false");
    } else {
        printf("%s: record index of %" PRIu64 " records written\n", pos[0], n);
    }
    return indexed ? STK_EXIT_OK : STK_EXIT_ERROR;
}

const stk_command stk_cmd_index = {"index", "write a .stoke dataset's record index in place", &cli,
                                   index_main};
