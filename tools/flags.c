/* Table-driven flag parsing and help text (flags.h). */
#include "tools/flags.h"

#include "tools/cli.h"

#include <string.h>

const stk_flag *stk_cli_find(const stk_cli *c, const char *name)
{
    return stk_flag_find(c->flags, name, strlen(name));
}

int stk_cli_parse(const stk_cli *c, void *args, int argc, char **argv, char ***pos, int *n_pos)
{
    int n;
    if (stk_flag_parse(c->flags, args, argc, argv, &n) != STK_OK)
        return stk_cli_usage(c->cmd, "%s", stk_last_error());
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

/* "  --name ARG" */
static int label(const stk_flag *f, char *buf, size_t n)
{
    return snprintf(buf, n, "  --%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
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
    for (const stk_flag *f = c->flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION) {
            int w = label(f, buf, sizeof buf);
            if (w > col && w <= 24) col = w;
        }
    col += 2;
    for (const stk_flag *f = c->flags; f->kind != STK_FLAG_KIND_END; f++) {
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
    }
    if (c->notes) fprintf(out, "\n%s", c->notes);
}
