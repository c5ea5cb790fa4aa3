/* A table's values stored, checked and shown (flag_table.h). */
#include "run/flag_table.h"

#include "common/log.h"
#include "common/text.h"
#include "train/device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is(const char *word, const char *name, size_t len)
{
    return word && strlen(word) == len && !strncmp(word, name, len);
}

const stk_flag *stk_flag_find(const stk_flag *flags, const char *name, size_t len)
{
    for (const stk_flag *f = flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION && is(f->name, name, len)) return f;
    for (const stk_flag *f = flags; f->kind != STK_FLAG_KIND_END; f++) {
        if (f->kind == STK_FLAG_KIND_SECTION) continue;
        bool alias = is(f->old, name, len);
        for (int i = 0; i < 3; i++) alias |= is(f->alias[i], name, len);
        if (alias) return f;
    }
    return NULL;
}

/* "a, b or c" */
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

const char *stk_flag_closest(const stk_flag *flags, const char *word, size_t len)
{
    const char *names[256];
    int n = 0;
    for (const stk_flag *f = flags; f->kind != STK_FLAG_KIND_END && n < 256; f++)
        if (f->kind != STK_FLAG_KIND_SECTION) names[n++] = f->name;
    return stk_text_closest(word, len, names, n);
}

/* "unknown option '--batch-size' (did you mean --batch?)" */
static stk_status unknown(const stk_flag *flags, const char *a, size_t len)
{
    const char *word = a + (a[1] == '-' ? 2 : 1);
    const char *hint = stk_flag_closest(flags, word, len - (size_t)(word - a));
    if (hint)
        return stk_error(STK_ERR_INVALID_ARG, "unknown option '%.*s' (did you mean --%s?)",
                         (int)len, a, hint);
    return stk_error(STK_ERR_INVALID_ARG, "unknown option '%.*s'", (int)len, a);
}

/* The tables' entry for len bytes of name, and the struct it goes in. */
static const stk_flag *find_in(const stk_flag *const *tables, void *const *args, int n,
                               const char *name, size_t len, void **arg)
{
    for (int t = 0; t < n; t++) {
        const stk_flag *f = stk_flag_find(tables[t], name, len);
        if (f) {
            *arg = args[t];
            return f;
        }
    }
    return NULL;
}

static const stk_flag *find_letter(const stk_flag *const *tables, void *const *args, int n, char c,
                                   void **arg)
{
    for (int t = 0; t < n; t++)
        for (const stk_flag *f = tables[t]; f->kind != STK_FLAG_KIND_END; f++)
            if (f->kind != STK_FLAG_KIND_SECTION && f->letter == c) {
                *arg = args[t];
                return f;
            }
    return NULL;
}

/* --no-X for a switch X, or --X for a switch no-X: the switch off. */
static const stk_flag *find_negation(const stk_flag *const *tables, void *const *args, int n,
                                     const char *name, size_t len, void **arg)
{
    const stk_flag *f = NULL;
    if (len > 3 && !strncmp(name, "no-", 3)) {
        f = find_in(tables, args, n, name + 3, len - 3, arg);
    } else if (len < 60) {
        char no[64];
        snprintf(no, sizeof no, "no-%.*s", (int)len, name);
        f = find_in(tables, args, n, no, len + 3, arg);
    }
    return f && f->kind == STK_FLAG_KIND_BOOL ? f : NULL;
}

/* A flag's value: the rest of its token, or the next argument (a switch's
 * optional one only when `greedy`: no positional arguments to mistake). */
static stk_status take_value(const stk_flag *f, void *arg, const char *rest, int argc, char **argv,
                             int *i, bool greedy)
{
    if (f->kind == STK_FLAG_KIND_BOOL) {
        if (!f->optional_value && rest)
            return stk_error(STK_ERR_INVALID_ARG, "--%s takes no value", f->name);
        if (f->optional_value && !rest && greedy && *i + 1 < argc && argv[*i + 1][0] != '-')
            rest = argv[++*i];
        if (f->optional_value && rest) {
            if (!*rest) return stk_error(STK_ERR_INVALID_ARG, "--%s=: an empty value", f->name);
            *(const char **)((char *)arg + f->value_offset) = rest;
        }
        return stk_flag_set(f, arg, NULL);
    }
    if (!rest && *i + 1 >= argc)
        return stk_error(STK_ERR_INVALID_ARG, "--%s needs a value (%s)", f->name, f->arg);
    return stk_flag_set(f, arg, rest ? rest : argv[++*i]);
}

/* "-b 64", "-b64", "-qv" */
static stk_status short_options(const stk_flag *const *tables, void *const *args, int n, int argc,
                                char **argv, int *i)
{
    const char *a = argv[*i];
    void *ignored;
    if (a[2] && find_in(tables, args, n, a + 1, strlen(a + 1), &ignored))
        return stk_error(STK_ERR_INVALID_ARG, "unknown option '%s' (did you mean -%s?)", a, a);
    for (int j = 1; a[j]; j++) {
        void *arg;
        const stk_flag *f = find_letter(tables, args, n, a[j], &arg);
        if (!f)
            return stk_error(STK_ERR_INVALID_ARG, "unknown option '-%c'%s", a[j],
                             j > 1 ? "" : " (long options start with --)");
        if (f->kind == STK_FLAG_KIND_BOOL) {
            STK_TRY(stk_flag_set(f, arg, NULL));
            continue;
        }
        return take_value(f, arg, a[j + 1] ? a + j + 1 : NULL, argc, argv, i, false);
    }
    return STK_OK;
}

stk_status stk_flag_parse_tables(const stk_flag *const *tables, void *const *args, int n_tables,
                                 int argc, char **argv, int *n_pos)
{
    int n = 0; /* positional arguments, gathered to the front of argv[1..] in order */
    bool flags_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (flags_done || a[0] != '-' || !a[1]) {
            if (!n_pos) return stk_error(STK_ERR_INVALID_ARG, "unexpected argument '%s'", a);
            argv[1 + n++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            flags_done = true;
            continue;
        }
        if (a[1] != '-') {
            STK_TRY(short_options(tables, args, n_tables, argc, argv, &i));
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        void *arg;
        const stk_flag *f = find_in(tables, args, n_tables, name, len, &arg);
        if (!f && (f = find_negation(tables, args, n_tables, name, len, &arg))) {
            if (eq) return stk_error(STK_ERR_INVALID_ARG, "--%.*s takes no value", (int)len, name);
            *(bool *)((char *)arg + f->offset) = false;
            continue;
        }
        if (!f) return unknown(tables[0], a, len + 2);
        if (is(f->old, name, len))
            stk_log_warn("--%s is now --%s (the old name still works)", f->old, f->name);
        STK_TRY(take_value(f, arg, eq ? eq + 1 : NULL, argc, argv, &i, !n_pos));
    }
    if (n_pos) *n_pos = n;
    return STK_OK;
}

stk_status stk_flag_parse(const stk_flag *flags, void *args, int argc, char **argv, int *n_pos)
{
    return stk_flag_parse_tables(&flags, &args, 1, argc, argv, n_pos);
}

stk_status stk_flag_parse_args(const stk_flag *flags, void *args, int argc, char **argv)
{
    return stk_flag_parse(flags, args, argc, argv, NULL);
}

stk_status stk_flag_defaults(const stk_flag *flags, void *args)
{
    for (const stk_flag *f = flags; f->kind != STK_FLAG_KIND_END; f++)
        if (f->kind != STK_FLAG_KIND_SECTION && f->def) STK_TRY(stk_flag_set(f, args, f->def));
    return STK_OK;
}

bool stk_flag_value_text(const stk_flag *f, const void *args, char *buf, size_t size)
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
