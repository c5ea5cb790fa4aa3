/* Table-driven flag parsing and help text (flags.h). */
#include "tools/flags.h"

#include "common/text.h"
#include "tools/cli.h"
#include "train/device.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const stk_flag *find(const stk_cli *c, const char *name, size_t len)
{
    for (const stk_flag *f = c->flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION && strlen(f->name) == len &&
            !strncmp(f->name, name, len))
            return f;
    return NULL;
}

/* "unknown option '--batch-size' (did you mean --batch?)" */
static int unknown_option(const stk_cli *c, const char *a, size_t len)
{
    const char *names[256];
    int n = 0;
    for (const stk_flag *f = c->flags; f->kind != STK_FLAG_KIND_END && n < 256; f++)
        if (f->kind != STK_FLAG_KIND_SECTION) names[n++] = f->name;
    const char *word = a + (a[1] == '-' ? 2 : 1);
    const char *hint = stk_text_closest(word, len - (size_t)(word - a), names, n);
    if (hint)
        return stk_cli_usage(c->cmd, "unknown option '%.*s' (did you mean --%s?)", (int)len, a,
                             hint);
    return stk_cli_usage(c->cmd, "unknown option '%.*s'", (int)len, a);
}

/* "a, b or c" */
const stk_flag *stk_cli_find(const stk_cli *c, const char *name)
{
    return find(c, name, strlen(name));
}

static void list_choices(const char *const *choices, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; choices[i] && used < n; i++) {
        const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
        used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, choices[i]);
    }
}

stk_status stk_flag_set(const stk_flag *f, void *args, const char *value)
{
    void *field = (char *)args + f->offset;
    switch (f->kind) {
    case STK_FLAG_KIND_BOOL: *(bool *)field = true; return STK_OK;
    case STK_FLAG_KIND_TEXT: *(const char **)field = value; return STK_OK;
    case STK_FLAG_KIND_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < f->lo || v > f->hi)
            return stk_error(STK_ERR_INVALID_ARG, "--%s %s: expected an integer in %lld..%lld",
                             f->name, value, (long long)f->lo, (long long)f->hi);
        *(int64_t *)field = v;
        return STK_OK;
    }
    case STK_FLAG_KIND_NUMBER: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end || !(v >= f->min && v <= f->max))
            return stk_error(STK_ERR_INVALID_ARG, "--%s %s: expected a number in %g..%g", f->name,
                             value, f->min, f->max);
        *(double *)field = v;
        return STK_OK;
    }
    case STK_FLAG_KIND_CHOICE:
        for (int i = 0; f->choices[i]; i++)
            if (!strcmp(f->choices[i], value)) {
                *(int *)field = i;
                return STK_OK;
            }
        char names[256];
        list_choices(f->choices, names, sizeof names);
        return stk_error(STK_ERR_INVALID_ARG, "--%s %s: expected %s", f->name, value, names);
    case STK_FLAG_KIND_LIST: {
        int *count = (int *)((char *)args + f->count_offset);
        if (*count == f->max_count)
            return stk_error(STK_ERR_INVALID_ARG, "at most %d --%s values", f->max_count, f->name);
        ((const char **)field)[(*count)++] = value;
        return STK_OK;
    }
    case STK_FLAG_KIND_DEVICE: {
        if (stk_device_spec_parse(value, (stk_device_spec *)field) == STK_OK) return STK_OK;
        char why[256]; /* stk_error writes where stk_last_error() reads */
        snprintf(why, sizeof why, "%s", stk_last_error());
        return stk_error(STK_ERR_INVALID_ARG, "--%s %s", f->name, why);
    }
    default: return stk_error(STK_ERR_INVALID_ARG, "--%s: a flag of no known kind", f->name);
    }
}

int stk_cli_parse(const stk_cli *c, void *args, int argc, char **argv, char ***pos, int *n_pos)
{
    /* positional arguments are gathered to the front of argv[1..] in order */
    int n = 0;
    bool flags_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (flags_done || a[0] != '-' || !a[1]) {
            argv[1 + n++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            flags_done = true;
            continue;
        }
        if (a[1] != '-') return unknown_option(c, a, strlen(a));
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const stk_flag *f = find(c, name, len);
        if (!f) return unknown_option(c, a, len + 2);
        const char *value = NULL;
        if (f->kind == STK_FLAG_KIND_BOOL) {
            if (eq) return stk_cli_usage(c->cmd, "--%s takes no value", f->name);
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return stk_cli_usage(c->cmd, "--%s needs a value (%s)", f->name, f->arg);
        }
        if (stk_flag_set(f, args, value) != STK_OK)
            return stk_cli_usage(c->cmd, "%s", stk_last_error());
    }
    if (n < c->min_args || n > c->max_args) {
        if (c->max_args == 0) return stk_cli_usage(c->cmd, "unexpected argument '%s'", argv[1]);
        return stk_cli_usage(c->cmd, "%s", c->args_error ? c->args_error : "wrong arguments");
    }
    *pos = argv + 1;
    *n_pos = n;
    return -1;
}

int stk_cli_defaults(const stk_cli *c, void *args)
{
    for (const stk_flag *f = c->flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION && f->def) {
            if (stk_flag_set(f, args, f->def) != STK_OK)
                return stk_cli_usage(c->cmd, "%s", stk_last_error());
        }
    return -1;
}

bool stk_cli_value_text(const stk_flag *f, const void *args, char *buf, size_t size)
{
    const char *field = (const char *)args + f->offset;
    buf[0] = '\0';
    switch (f->kind) {
    case STK_FLAG_KIND_BOOL:
        snprintf(buf, size, "%s", *(const bool *)field ? "yes" : "no");
        return true;
    case STK_FLAG_KIND_INT: {
        int64_t v = *(const int64_t *)field;
        if (v < f->lo) return false;
        snprintf(buf, size, "%lld", (long long)v);
        return true;
    }
    case STK_FLAG_KIND_NUMBER: {
        double v = *(const double *)field;
        if (!(v >= f->min)) return false;
        stk_text_shortest(v, buf, size);
        return true;
    }
    case STK_FLAG_KIND_TEXT: {
        const char *v = *(const char *const *)field;
        if (!v) return false;
        snprintf(buf, size, "%s", v);
        return true;
    }
    case STK_FLAG_KIND_CHOICE:
        snprintf(buf, size, "%s", f->choices[*(const int *)field]);
        return true;
    case STK_FLAG_KIND_LIST: {
        int n = *(const int *)((const char *)args + f->count_offset);
        size_t used = 0;
        for (int i = 0; i < n && used < size; i++)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "",
                                     ((const char *const *)field)[i]);
        return n > 0;
    }
    case STK_FLAG_KIND_DEVICE:
        stk_device_spec_name((const stk_device_spec *)field, buf, size);
        return true;
    default: return false;
    }
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
