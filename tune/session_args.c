/* A sweep's flags kept in DIR/sweep.txt for --resume (session.h): given
 * --resume --out DIR alone, they are read back; given in full, they must be
 * the same. */
#include "common/fs.h"
#include "tune/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Flags of one call, not of what the sweep is: --resume, --json,
 * --stop-after N, and --out DIR (a resume writes into the folder it is
 * given, wherever the sweep was first made: a copy resumes as the copy).
 * Returns how many of argv's items from i are one (0: a flag of the sweep). */
static int session_skip(int argc, char **argv, int i)
{
    const char *a = argv[i];
    if (!strcmp(a, "--resume") || !strcmp(a, "--json")) return 1;
    if (!strcmp(a, "--stop-after") || !strcmp(a, "--out")) return i + 1 < argc ? 2 : 1;
    return !strncmp(a, "--stop-after=", 13) || !strncmp(a, "--out=", 6);
}

typedef struct args {
    int argc;
    char **argv;
} args;

/* sweep.txt's first line: the flags below it have '\' and newline escaped
 * (\\ and \n), so any value, a multi-line --space among them, round-trips.
 * A file without it (an older Stoke's) holds them as they are. */
static const char sweep_header[] = "# stoke tune flags, one per line (\\\\ and \\n escaped)";

static void flags_text(FILE *f, const void *ctx)
{
    const args *a = ctx;
    fprintf(f, "%s\n", sweep_header);
    for (int i = 1; i < a->argc;) {
        int skip = session_skip(a->argc, a->argv, i);
        if (skip) {
            i += skip;
            continue;
        }
        for (const char *c = a->argv[i++]; *c; c++)
            if (*c == '\\' || *c == '\n')
                fputs(*c == '\\' ? "\\\\" : "\\n", f);
            else
                fputc(*c, f);
        fputc('\n', f);
    }
}

/* DIR/sweep.txt: the flags that made the sweep, one per line. */
stk_status stk_tune_save_flags(const char *out, int argc, char **argv)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.txt", out);
    args a = {argc, argv};
    return stk_tune_write_text(path, flags_text, &a);
}

/* s with \\ and \n undone, in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && (s[1] == '\\' || s[1] == 'n'))
            *o++ = *++s == 'n' ? '\n' : '\\';
        else
            *o++ = *s;
    }
    *o = '\0';
}

/* The saved flags of DIR (argv[0] first), with room for `extra` more and a
 * NULL; *n of them. An --out an older Stoke saved is dropped (the folder is
 * the one given). */
static char **load_flags(const char *out, int extra, int *n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/sweep.txt", out);
    uint8_t *data;
    size_t len;
    if (stk_file_read_all(path, 1 << 20, &data, &len) != STK_OK) return NULL;
    char **v = calloc(len + (size_t)extra + 2, sizeof *v); /* lines <= len, + "tune" */
    char *text = realloc(data, len + 1);
    if (!v || !text) {
        free(v);
        free(text ? text : (char *)data);
        stk_error(STK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    text[len] = '\0';
    bool escaped = !strncmp(text, sweep_header, strlen(sweep_header));
    *n = 0;
    v[(*n)++] = strdup("tune");
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (escaped && l[0] == '#') continue;
        if (escaped) unescape(l);
        v[(*n)++] = strdup(l);
    }
    free(text);
    int k = 1; /* --out DIR or --out=DIR of an older sweep.txt */
    for (int i = 1; i < *n; i++) {
        int skip = !strcmp(v[i], "--out") ? (i + 1 < *n ? 2 : 1) : !strncmp(v[i], "--out=", 6);
        for (int j = 0; j < skip; j++) free(v[i + j]);
        if (skip)
            i += skip - 1;
        else
            v[k++] = v[i];
    }
    *n = k;
    v[k] = NULL;
    return v;
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

stk_status stk_tune_resume_path(int argc, char **argv, char ***out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    int at = -1;
    const char *dir = NULL;
    for (int i = 1; i < argc && at < 0; i++) {
        if (!strncmp(argv[i], "--resume=", 9))
            at = i, dir = argv[i] + 9;
        else if (!strcmp(argv[i], "--resume") && i + 1 < argc && argv[i + 1][0] != '-')
            at = i, dir = argv[i + 1];
    }
    if (at < 0) return STK_OK;
    const char *given = out_flag(argc, argv);
    if (given && strcmp(given, dir))
        return stk_error(STK_ERR_INVALID_ARG, "--resume %s and --out %s: name the sweep once", dir,
                         given);
    char **v = calloc((size_t)argc + 3, sizeof *v);
    if (!v) return stk_error(STK_ERR_NOMEM, "out of memory");
    int n = 0;
    bool ok = true;
    for (int i = 0; ok && i < argc; i++) {
        if (i != at) {
            ok = (v[n++] = strdup(argv[i])) != NULL;
            continue;
        }
        ok = (v[n++] = strdup("--resume")) != NULL;
        if (ok && !given) ok = (v[n++] = strdup("--out")) && (v[n++] = strdup(dir));
        if (argv[i][8] != '=') i++; /* the DIR after --resume */
    }
    if (!ok) {
        stk_tune_free_flags(v, n);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    *out = v;
    *n_out = n;
    return STK_OK;
}

void stk_tune_free_flags(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

stk_status stk_tune_resume_flags(int argc, char **argv, char ***eff, int *n_eff)
{
    const char *out = out_flag(argc, argv);
    if (!out)
        return stk_error(STK_ERR_INVALID_ARG, "--resume needs --out DIR, the sweep to continue");
    int n_saved;
    char **saved = load_flags(out, argc, &n_saved);
    if (!saved)
        return stk_error(STK_ERR_INVALID_ARG, "--resume: %s/sweep.txt: %s", out,
                         access(out, F_OK) ? "no such sweep" : stk_last_error());
    int given = 0;
    for (int i = 1; i < argc;) {
        int skip = session_skip(argc, argv, i);
        given += !skip;
        i += skip ? skip : 1;
    }
    int j = 1;
    for (int i = 1; given && i < argc; i++) {
        int skip = session_skip(argc, argv, i);
        if (skip) {
            i += skip - 1;
            continue;
        }
        if (j >= n_saved || strcmp(argv[i], saved[j])) {
            stk_status st = stk_error(STK_ERR_INVALID_ARG,
                                      "--resume: '%s' differs from the sweep in %s (%s/sweep.txt "
                                      "has '%s'); give --resume --out %s alone to continue it",
                                      argv[i], out, out, j < n_saved ? saved[j] : "(nothing)", out);
            stk_tune_free_flags(saved, n_saved);
            return st;
        }
        j++;
    }
    if (given && j < n_saved) { /* given in full, but fewer */
        stk_status st = stk_error(STK_ERR_INVALID_ARG,
                                  "--resume: %s/sweep.txt also has '%s'; give --resume --out %s "
                                  "alone to continue it",
                                  out, saved[j], out);
        stk_tune_free_flags(saved, n_saved);
        return st;
    }
    /* this call's own: --out DIR, --json, --stop-after N (room: load_flags' extra) */
    for (int i = 1; i < argc; i++) {
        int skip = session_skip(argc, argv, i);
        for (int k = 0; k < skip && strcmp(argv[i], "--resume"); k++)
            saved[n_saved++] = strdup(argv[i + k]);
        if (skip) i += skip - 1;
    }
    saved[n_saved] = NULL;
    *eff = saved;
    *n_eff = n_saved;
    return STK_OK;
}
