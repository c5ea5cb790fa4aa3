/* Table-driven flag parsing and help text (flags.h). */
#include "tools/flags.h"

#include "common/log.h"
#include "tools/cli.h"

#include <stdlib.h>
#include <string.h>

const stk_flag *stk_cli_find(const stk_cli *c, const char *name)
{
    return stk_flag_find(c->flags, name, strlen(name));
}

/* The flags every command takes (beside -h/--help, answered by main.c). */
typedef struct cli_common {
    bool quiet, verbose;
} cli_common;

const stk_flag stk_cli_common_flags[] = {
    STK_FLAG_SECTION("every command"),
    STK_FLAG_BOOL(cli_common, quiet, "quiet",
                  "no progress bars or notes on stderr: results, warnings and errors only",
                  .letter = 'q'),
    STK_FLAG_BOOL(cli_common, verbose, "verbose", "debug detail on stderr (as STOKE_LOG=debug)",
                  .letter = 'v'),
    STK_FLAG_END};

/* -q: warnings and errors only, no progress bars; -v: debug detail. */
static void apply_common(const cli_common *o)
{
    if (o->verbose) stk_log_set_level(STK_LOG_DEBUG);
    if (o->quiet && !o->verbose) {
        stk_log_set_level(STK_LOG_WARN);
        setenv("STOKE_PROGRESS", "off", 1);
    }
}

/* --data PATH (or --checkpoint FILE) for the first argument: a table of
 * the command's first_arg_names. */
typedef struct first_arg {
    const char *value[4];
} first_arg;

static int first_arg_table(const stk_cli *c, stk_flag table[4])
{
    int n = 0;
    for (int i = 0; c->first_arg_names && c->first_arg_names[i] && n < 3; i++, n++)
        table[n] = (stk_flag)STK_FLAG_TEXT(first_arg, value[n], c->first_arg_names[i], "PATH",
                                           "the same as giving it as the first argument");
    table[n] = (stk_flag)STK_FLAG_END;
    return n;
}

/* The named first argument put before the positional ones (argv has room:
 * the flag took at least one item of it). */
static int put_first(const stk_cli *c, const first_arg *fa, char **argv, int *n)
{
    const char *given = NULL;
    for (int i = 0; i < 3; i++) {
        if (!fa->value[i]) continue;
        if (given)
            return stk_cli_usage(c->cmd, "--%s and --%s name the same argument: give one",
                                 c->first_arg_names[0], c->first_arg_names[i]);
        given = fa->value[i];
    }
    if (!given) return -1;
    if (*n >= c->min_args && *n >= c->max_args)
        return stk_cli_usage(c->cmd, "--%s %s and the argument '%s': give it once",
                             c->first_arg_names[0], given, argv[1]);
    memmove(argv + 2, argv + 1, (size_t)*n * sizeof *argv);
    argv[1] = (char *)given;
    (*n)++;
    return -1;
}

int stk_cli_parse(const stk_cli *c, void *args, int argc, char **argv, char ***pos, int *n_pos)
{
    int n;
    cli_common common = {0};
    first_arg fa = {{0}};
    stk_flag named[4];
    first_arg_table(c, named);
    const stk_flag *const tables[] = {c->flags, stk_cli_common_flags, named};
    void *const structs[] = {args, &common, &fa};
    /* (a command without positional arguments lets a switch take an optional value) */
    n = 0;
    if (stk_flag_parse_tables(tables, structs, 3, argc, argv, c->max_args ? &n : NULL) != STK_OK)
        return stk_cli_usage(c->cmd, "%s", stk_last_error());
    int rc = put_first(c, &fa, argv, &n);
    if (rc >= 0) return rc;
    apply_common(&common);
    if (getenv("STOKE_PARSE_ONLY")) return STK_EXIT_OK;
    if (n < c->min_args || n > c->max_args) {
        if (c->max_args == 0) return stk_cli_usage(c->cmd, "unexpected argument '%s'", argv[1]);
        return stk_cli_usage(c->cmd, "%s", c->args_error ? c->args_error : "wrong arguments");
    }
    *pos = argv + 1;
    *n_pos = n;
    return -1;
}

int stk_cli_borrow(stk_flag *dst, int n, int cap, const stk_cli *from, const char *const *names,
                   size_t offset)
{
    for (int i = 0; names[i] && n < cap - 1; i++) {
        const stk_flag *f = stk_cli_find(from, names[i]);
        if (!f) continue;
        dst[n] = *f;
        dst[n].offset += offset;
        if (f->kind == STK_FLAG_KIND_LIST) dst[n].count_offset += offset;
        n++;
    }
    return n;
}

int stk_cli_append(stk_flag *dst, int n, int cap, const stk_flag *own)
{
    for (; own->kind != STK_FLAG_KIND_END && n < cap - 1; own++) dst[n++] = *own;
    return n;
}

int stk_cli_defaults(const stk_cli *c, void *args)
{
    return stk_flag_defaults(c->flags, args) == STK_OK
               ? -1
               : stk_cli_usage(c->cmd, "%s", stk_last_error());
}

/* "  --name ARG", "  -b, --batch B" */
static int label(const stk_flag *f, char *buf, size_t n)
{
    char letter[8] = "";
    if (f->letter) snprintf(letter, sizeof letter, "-%c, ", f->letter);
    return snprintf(buf, n, "  %s--%s%s%s", letter, f->name, f->arg ? " " : "",
                    f->arg ? f->arg : "");
}

/* "also --batch-size" under a flag's help: the names it also answers to */
static void aliases_line(const stk_flag *f, FILE *out, int col)
{
    if (!f->alias[0]) return;
    fprintf(out, "%*salso", col, "");
    for (int i = 0; i < 3 && f->alias[i]; i++) fprintf(out, "%s --%s", i ? "," : "", f->alias[i]);
    fputc('\n', out);
}

/* The help's flag lines of one table, aligned at col. */
static void flag_lines(const stk_flag *flags, FILE *out, int col)
{
    char buf[128];
    for (const stk_flag *f = flags; f->kind != STK_FLAG_KIND_END; f++) {
        if (f->kind == STK_FLAG_KIND_SECTION) {
            fprintf(out, "\n%s:\n", f->name);
            continue;
        }
        int w = label(f, buf, sizeof buf);
        fputs(buf, out);
        const char *h = f->help ? f->help : "";
        if (w + 1 > col) /* too long: the help starts on its own line */
            fprintf(out, "\n%*s", col, "");
        else
            fprintf(out, "%*s", col - w, "");
        for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
            fprintf(out, "%.*s\n%*s", (int)(nl - h), h, col, "");
        fprintf(out, "%s\n", h);
        aliases_line(f, out, col);
    }
}

void stk_cli_help(const stk_cli *c, FILE *out)
{
    const char *u = c->usage;
    fputs("usage: ", out);
    for (const char *nl; (nl = strchr(u, '\n')); u = nl + 1)
        fprintf(out, "%.*s\n       ", (int)(nl - u), u);
    fprintf(out, "%s\n", u);
    if (c->about) fprintf(out, "\n%s", c->about);
    /* one column for every help text, unless a label is too long for it */
    int col = 0;
    char buf[128];
    const stk_flag *const tables[] = {c->flags, stk_cli_common_flags};
    for (int t = 0; t < 2; t++)
        for (const stk_flag *f = tables[t]; f->kind != STK_FLAG_KIND_END; f++)
            if (f->kind != STK_FLAG_KIND_SECTION) {
                int w = label(f, buf, sizeof buf);
                if (w > col && w <= 24) col = w;
            }
    col += 2;
    flag_lines(c->flags, out, col);
    stk_flag named[4];
    if (first_arg_table(c, named)) {
        fprintf(out, "\nthe first argument by name:\n");
        flag_lines(named, out, col);
    }
    flag_lines(stk_cli_common_flags, out, col);
    if (c->notes) fprintf(out, "\n%s", c->notes);
}
