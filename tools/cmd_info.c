/* stoke info: what a dataset file holds. */
#include "common/fs.h"
#include "storage/dataset.h"
#include "common/json.h"
#include "tools/cli.h"
#include "tools/flags.h"
#include "tools/info_checkpoint.h"

#include <stdlib.h>
#include <string.h>

typedef struct info_args {
    bool json;
} info_args;

static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_JSON(info_args, json,
                  "one JSON object on stdout (keys: path, version, records, encoding,\n"
                  "channels, file_bytes, width, height, classes [{name, count}], mean,\n"
                  "std, source, packed_with)"),
    STK_FLAG_END};

static const stk_cli cli = {
    .cmd = "info",
    .usage = "stoke info [--json] DATA.stoke|CHECKPOINT.safetensors",
    .about = "Show what a dataset holds: format version, records, classes with their counts,\n"
             "encoding, image size range, per-channel mean/std, file size, and how it was packed.\n"
             "Given a checkpoint (or a `stoke export --format safetensors` file): the model,\n"
             "its classes by name, the input normalisation and transforms training used, and\n"
             "where training stands (epochs, steps, best epoch); --json keys: path,\n"
             "file_bytes, sha256, format, model, in_channels, image_size, classes, tensors,\n"
             "parameters, class_names, input_mean, input_std, transform, val_transform, data,\n"
             "optimizer, lr, ranks, batch_per_rank, epoch, step, best_epoch.\n"
             "Opening checks the whole LMDB structure, the meta's values and its checksum\n"
             "(format 2); a damaged file is refused with \"FILE: damaged (what, where)\" and\n"
             "exit 1. `stoke verify` checks every record. Control bytes in names from the\n"
             "file are shown as \\xNN.\n",
    .flags = flags,
    .min_args = 1,
    .max_args = 1,
    .args_error = "expected one DATA.stoke or CHECKPOINT.safetensors",
    .first_arg_names = (const char *const[]){"data", "checkpoint", NULL}};

static void print_json(const char *path, const stk_meta *m, uint64_t file_bytes)
{
    printf("{\"path\": ");
    stk_json_write_string(stdout, path);
    printf(", \"version\": %u, \"records\": %llu, \"encoding\": \"%s\", \"channels\": %d, "
           "\"file_bytes\": %llu, \"width\": {\"min\": %u, \"max\": %u}, "
           "\"height\": {\"min\": %u, \"max\": %u}, \"classes\": [",
           m->version, (unsigned long long)m->count, stk_encoding_name(m->encoding), m->channels,
           (unsigned long long)file_bytes, m->min_width, m->max_width, m->min_height,
           m->max_height);
    for (uint32_t i = 0; i < m->num_classes; i++) {
        printf("%s{\"name\": ", i ? ", " : "");
        stk_json_write_string(stdout, m->class_names[i]);
        printf(", \"count\": %llu}", (unsigned long long)m->class_counts[i]);
    }
    printf("]");
    if (m->has_stats) {
        printf(", \"mean\": [");
        for (int c = 0; c < m->channels; c++) printf("%s%.6f", c ? ", " : "", m->mean[c]);
        printf("], \"std\": [");
        for (int c = 0; c < m->channels; c++) printf("%s%.6f", c ? ", " : "", m->std[c]);
        printf("]");
    }
    printf(", \"source\": ");
    stk_json_write_string(stdout, m->source);
    printf(", \"packed_with\": ");
    stk_json_write_string(stdout, m->packed_with);
    printf("}\n");
}

/* `s` with control bytes escaped, whole (4 output bytes per input byte at
 * most); the result lives until the next call. */
static const char *safe(const char *s)
{
    static char *buf;
    static size_t cap;
    size_t need = 4 * strlen(s) + 8;
    if (need > cap) {
        char *b = realloc(buf, need);
        if (!b) return "(out of memory)";
        buf = b;
        cap = need;
    }
    return stk_printable(s, buf, cap);
}

static void print_text(const char *path, const stk_meta *m, uint64_t file_bytes)
{
    char size[32];
    printf("file        %s (%s)\n", path, stk_cli_bytes(file_bytes, size, sizeof size));
    printf("format      %s version %u\n", STK_FORMAT_NAME, m->version);
    printf("records     %llu\n", (unsigned long long)m->count);
    printf("encoding    %s, %d channel%s\n", stk_encoding_name(m->encoding), m->channels,
           m->channels > 1 ? "s" : "");
    if (m->min_width == m->max_width && m->min_height == m->max_height)
        printf("image size  %ux%u (every record)\n", m->min_width, m->min_height);
    else
        printf("image size  width %u..%u, height %u..%u\n", m->min_width, m->max_width,
               m->min_height, m->max_height);
    if (m->has_stats) {
        printf("mean        ");
        for (int c = 0; c < m->channels; c++) printf("%s%.4f", c ? " " : "", m->mean[c]);
        printf("\nstd         ");
        for (int c = 0; c < m->channels; c++) printf("%s%.4f", c ? " " : "", m->std[c]);
        printf("\n");
    }
    /* Strings from the file go to a terminal: control bytes (escape
     * sequences) are shown as \xNN, never sent raw. */
    printf("source      %s\n", safe(m->source));
    printf("packed with %s\n", safe(m->packed_with));
    printf("classes     %u\n", m->num_classes);
    for (uint32_t i = 0; i < m->num_classes; i++)
        printf("  %5u  %-24s %llu\n", i, safe(m->class_names[i]),
               (unsigned long long)m->class_counts[i]);
}

static int info_main(int argc, char **argv)
{
    info_args a = {0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    bool json = a.json;
    size_t n = strlen(pos[0]);
    if (n > 12 && !strcmp(pos[0] + n - 12, ".safetensors")) return info_checkpoint(pos[0], json);
    stk_dataset *ds;
    if (stk_dataset_open(pos[0], &ds) != STK_OK) return stk_cli_fail();
    if (json)
        print_json(pos[0], stk_dataset_meta(ds), stk_dataset_file_size(ds));
    else
        print_text(pos[0], stk_dataset_meta(ds), stk_dataset_file_size(ds));
    stk_dataset_close(ds);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_info = {"info", "show what a .stoke dataset or a checkpoint holds", &cli,
                                  info_main};
