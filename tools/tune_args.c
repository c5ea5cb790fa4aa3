/* `stoke tune`'s argument vector before its flags are parsed (cmd_tune.c):
 * --config FILE expanded in place, and a sweep's flags kept in DIR/sweep.txt
 * for --resume (given --resume --out DIR alone, they are read back; given
 * in full, they must be the same). */
#include "tools/tune_args.h"

#include "common/fs.h"
#include "tools/cli.h"
#include "tools/tune_sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether a is --resume or --json: flags that are not part of what a sweep is. */
static bool session_flag(const char *a) { return !strcmp(a, "--resume") || !strcmp(a, "--json"); }

/* --stop-after N is per call too: argv[i] and its value are skipped. */
static int session_skip(char **argv, int i)
{
    if (!strcmp(argv[i], "--stop-after")) return 2;
    if (!strncmp(argv[i], "--stop-after=", 13)) return 1;
    return session_flag(argv[i]) ? 1 : 0;
}

typedef struct args {
    int argc;
    char **argv;
} args;

static void flags_text(FILE *f, const void *ctx)
{
    const args *a = ctx;
    for (int i = 1; i < a->argc;) {
        int skip = session_skip(a->argv, i);
        if (!skip) fprintf(f, "%s\n", a->argv[i++]);
        i += skip;
    }
}

/* DIR/sweep.txt: the flags that made the sweep, one per line. */
stk_status tune_save_flags(const char *out, int argc, char **argv)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.txt", out);
    args a = {argc, argv};
    return tune_write_text(path, flags_text, &a);
}

/* The saved flags of DIR (argv[0] first), NULL-terminated; *n of them. */
static char **load_flags(const char *out, int *n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.txt", out);
    uint8_t *data;
    size_t len;
    if (stk_file_read_all(path, 1 << 20, &data, &len) != STK_OK) return NULL;
    char **v = calloc(len + 6, sizeof *v); /* + "tune", --json, --stop-after N */
    char *text = realloc(data, len + 1);
    if (!v || !text) {
        free(v);
        free(text ? text : (char *)data);
        stk_error(STK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    text[len] = '\0';
    *n = 0;
    v[(*n)++] = strdup("tune");
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        v[(*n)++] = strdup(l);
    free(text);
    return v;
}

void tune_free_flags(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

/* --out's value in argv, or NULL. */
static const char *out_flag(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) return argv[i + 1];
        if (!strncmp(argv[i], "--out=", 6)) return argv[i] + 6;
    }
    return NULL;
}

/* --resume: the flags of the sweep in --out. Given alone (with --out) they
 * are read from DIR/sweep.txt; given in full they must be the same. Returns
 * -1 to go on with *eff (owned: *n_eff), or an exit code. */
int tune_resume_argv(int argc, char **argv, char ***eff, int *n_eff)
{
    const char *out = out_flag(argc, argv);
    if (!out) return stk_cli_usage("tune", "--resume needs --out DIR, the sweep to continue");
    int n_saved;
    char **saved = load_flags(out, &n_saved);
    if (!saved)
        return stk_cli_usage("tune", "--resume: %s/sweep.txt: %s", out,
                             access(out, F_OK) ? "no such sweep" : stk_last_error());
    int given = 0;
    for (int i = 1; i < argc;) {
        int skip = session_skip(argv, i);
        given += !skip;
        i += skip ? skip : 1;
    }
    bool only_out = given == 2 || (given == 1 && !strncmp(argv[1], "--out=", 6));
    if (!only_out) {
        int j = 1;
        for (int i = 1; i < argc; i++) {
            int skip = session_skip(argv, i);
            if (skip) {
                i += skip - 1;
                continue;
            }
            if (j >= n_saved || strcmp(argv[i], saved[j])) {
                int rc =
                    stk_cli_usage("tune",
                                  "--resume: '%s' differs from the sweep in %s (%s/sweep.txt "
                                  "has '%s'); give --resume --out %s alone to continue it",
                                  argv[i], out, out, j < n_saved ? saved[j] : "(nothing)", out);
                tune_free_flags(saved, n_saved);
                return rc;
            }
            j++;
        }
    }
    for (int i = 1; i < argc; i++) /* this call's own: --json, --stop-after N */
        if (session_skip(argv, i) && strcmp(argv[i], "--resume")) {
            saved[n_saved++] = strdup(argv[i]);
            if (!strcmp(argv[i], "--stop-after") && i + 1 < argc)
                saved[n_saved++] = strdup(argv[++i]);
        }
    saved[n_saved] = NULL;
    *eff = saved;
    *n_eff = n_saved;
    return -1;
}

/* argv with --config FILE's flags in its place (owned: *n_eff), or argv
 * itself (*eff NULL). -1 to go on, or the exit code. */
int tune_expand_config(int argc, char **argv, config_known known, char ***eff, int *n_eff)
{
    *eff = NULL;
    for (int i = 1; i < argc; i++) {
        const char *path = !strcmp(argv[i], "--config") && i + 1 < argc ? argv[i + 1]
                           : !strncmp(argv[i], "--config=", 9)          ? argv[i] + 9
                                                                        : NULL;
        if (!path) continue;
        char **file_flags;
        int n;
        if (tune_config_flags(path, known, &file_flags, &n) >= 0)
            return stk_cli_usage("tune", "%s", stk_last_error());
        int skip = argv[i][8] == '=' ? 1 : 2;
        char **v = calloc((size_t)(argc + n + 1), sizeof *v);
        if (!v) {
            for (int k = 0; k < n; k++) free(file_flags[k]);
            free(file_flags);
            return stk_cli_fail();
        }
        int m = 0;
        v[m++] = strdup(argv[0]);
        for (int k = 0; k < n; k++) v[m++] = file_flags[k]; /* the file's first */
        for (int k = 1; k < argc; k++)
            if (k < i || k >= i + skip) v[m++] = strdup(argv[k]);
        free(file_flags);
        *eff = v;
        *n_eff = m;
        return -1;
    }
    return -1;
}
