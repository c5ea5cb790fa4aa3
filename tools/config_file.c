/* --config FILE (stoke train, stoke tune): a JSON object or a TOML file
 * holding the same flags as the command line (config_file.h). */
#include "tools/config_file.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"
#include "tools/cli.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct flags_out {
    char **v;
    int n, cap;
} flags_out;

static stk_status push(flags_out *o, const char *s, size_t len)
{
    if (o->n + 2 > o->cap) {
        int cap = o->cap ? 2 * o->cap : 32;
        char **v = realloc(o->v, (size_t)cap * sizeof *v);
        if (!v) return stk_error(STK_ERR_NOMEM, "out of memory");
        o->v = v, o->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return stk_error(STK_ERR_NOMEM, "out of memory");
    memcpy(c, s, len);
    c[len] = '\0';
    o->v[o->n++] = c;
    o->v[o->n] = NULL;
    return STK_OK;
}

/* ---- TOML: the parse position (the text, where we are; for messages the line) ---- */
typedef struct parser {
    const char *path, *p, *start;
    const char *flags_of; /* "stoke train": whose flags the keys name, for messages */
} parser;

static int line_of(const parser *ps)
{
    int line = 1;
    for (const char *q = ps->start; q < ps->p; q++) line += *q == '\n';
    return line;
}

static stk_status bad(const parser *ps, const char *what)
{
    return stk_error(STK_ERR_FORMAT, "--config %s line %d: %s", ps->path, line_of(ps), what);
}

static void skip_space(parser *ps)
{
    for (;;) {
        while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r') ps->p++;
        if (*ps->p == '#')
            while (*ps->p && *ps->p != '\n') ps->p++;
        else
            return;
    }
}

/* A quoted string (TOML's basic "..." with escapes, its
 * literal '...'), its content appended to buf. */
static stk_status string(parser *ps, char *buf, size_t cap)
{
    char q = *ps->p++;
    size_t n = 0;
    while (*ps->p && *ps->p != q && *ps->p != '\n') {
        char c = *ps->p++;
        if (c == '\\' && q == '"') {
            c = *ps->p++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '"':
            case '\\':
            case '/': break;
            default: return bad(ps, "an escape other than \\\" \\\\ \\/ \\n \\t \\r in a string");
            }
        }
        if (n + 1 >= cap) return bad(ps, "a string longer than 4 KiB");
        buf[n++] = c;
    }
    if (*ps->p != q) return bad(ps, "a string without its closing quote");
    ps->p++;
    buf[n] = '\0';
    return STK_OK;
}

/* A scalar: a string, a number, true or false. *is_bool, *truth for the latter. */
static stk_status scalar(parser *ps, char *buf, size_t cap, bool *is_bool, bool *truth)
{
    *is_bool = false;
    if (*ps->p == '"' || *ps->p == '\'') return string(ps, buf, cap);
    if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "false", 5)) {
        *is_bool = true;
        *truth = *ps->p == 't';
        ps->p += *truth ? 4 : 5;
        return STK_OK;
    }
    size_t n = strspn(ps->p, "+-0123456789.eE_");
    if (!n || n >= cap) return bad(ps, "a value that is not a string, a number, true or false");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ps->p[i] != '_') buf[k++] = ps->p[i]; /* TOML's 1_000 */
    buf[k] = '\0';
    ps->p += n;
    return STK_OK;
}

/* key = value (TOML) or "key": value (JSON) into flags. */
static stk_status entry(parser *ps, const char *key, flags_out *o, config_known known)
{
    char flag[96];
    snprintf(flag, sizeof flag, "--%s", key);
    if (!known(key))
        return stk_error(STK_ERR_INVALID_ARG, "--config %s line %d: '%s' is not a flag of %s",
                         ps->path, line_of(ps), key, ps->flags_of);
    char value[4096];
    bool is_bool, truth;
    skip_space(ps);
    if (*ps->p == '[') { /* a repeatable flag, once per value */
        ps->p++;
        for (;;) {
            skip_space(ps);
            if (*ps->p == ']') break;
            STK_TRY(scalar(ps, value, sizeof value, &is_bool, &truth));
            if (is_bool) return bad(ps, "true or false in a list");
            STK_TRY(push(o, flag, strlen(flag)));
            STK_TRY(push(o, value, strlen(value)));
            skip_space(ps);
            if (*ps->p == ',')
                ps->p++;
            else if (*ps->p != ']')
                return bad(ps, "a list without its closing ]");
        }
        ps->p++;
        return STK_OK;
    }
    STK_TRY(scalar(ps, value, sizeof value, &is_bool, &truth));
    if (is_bool) return truth ? push(o, flag, strlen(flag)) : STK_OK; /* false: left out */
    STK_TRY(push(o, flag, strlen(flag)));
    return push(o, value, strlen(value));
}

/* ---- JSON (jansson, common/json.h) ----------------------------------------------- */

/* The line of a key's first mention ("key" in quotes), for messages: the
 * parsed object no longer knows where its keys were. */
static int json_key_line(const char *text, const char *key)
{
    char quoted[96];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *at = strstr(text, quoted);
    int line = 1;
    for (const char *q = text; at && q < at; q++) line += *q == '\n';
    return line;
}

/* A JSON number as the shortest text that reads back as it (0.1, not
 * 0.10000000000000001); integers as they are. */
static void json_number_text(const json_t *v, char *buf, size_t cap)
{
    if (json_is_integer(v)) {
        snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return;
    }
    stk_text_shortest(json_real_value(v), buf, cap);
}

/* One value of key: a string or a number (the flag and its value), true
 * (the switch) or false (left out), or a list of strings and numbers (the
 * repeatable flag once per item). */
static stk_status json_entry(const char *path, int line, const char *key, const json_t *v,
                             flags_out *o)
{
    char flag[96], value[64];
    snprintf(flag, sizeof flag, "--%s", key);
    if (json_is_boolean(v)) return json_is_true(v) ? push(o, flag, strlen(flag)) : STK_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_is_array(v) ? json_array_get(v, i) : v;
        const char *text = value;
        if (json_is_string(item))
            text = json_string_value(item);
        else if (json_is_number(item))
            json_number_text(item, value, sizeof value);
        else
            return stk_error(STK_ERR_FORMAT,
                             "--config %s line %d: %s: a value that is not a string, a number, "
                             "true or false%s",
                             path, line, key, json_is_array(v) ? " in a list" : "");
        STK_TRY(push(o, flag, strlen(flag)));
        STK_TRY(push(o, text, strlen(text)));
    }
    return STK_OK;
}

static stk_status parse_json(const char *path, const char *flags_of, const char *text, size_t len,
                             flags_out *o, config_known known)
{
    json_t *root;
    stk_status st = stk_json_load(text, len, &root);
    if (st != STK_OK) { /* "line L, column C: ..." */
        char why[300];
        snprintf(why, sizeof why, "%s", stk_last_error());
        return stk_error(st, "--config %s %s", path, why);
    }
    if (!json_is_object(root))
        st = stk_error(STK_ERR_FORMAT, "--config %s: not a JSON object", path);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (st != STK_OK) break;
        int line = json_key_line(text, key);
        if (!known(key))
            st = stk_error(STK_ERR_INVALID_ARG, "--config %s line %d: '%s' is not a flag of %s",
                           path, line, key, flags_of);
        else
            st = json_entry(path, line, key, v, o);
    }
    json_decref(root);
    return st;
}

/* ---- TOML ------------------------------------------------------------------------- */

static stk_status parse_toml(parser *ps, flags_out *o, config_known known)
{
    for (;;) {
        skip_space(ps);
        if (!*ps->p) return STK_OK;
        if (*ps->p == '\n') {
            ps->p++;
            continue;
        }
        if (*ps->p == '[') return bad(ps, "a [table]: the flags are top-level keys");
        char key[80];
        size_t n =
            strspn(ps->p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_");
        if (*ps->p == '"')
            STK_TRY(string(ps, key, sizeof key));
        else if (n && n < sizeof key) {
            memcpy(key, ps->p, n);
            key[n] = '\0';
            ps->p += n;
        } else
            return bad(ps, "expected KEY = VALUE");
        skip_space(ps);
        if (*ps->p++ != '=') return bad(ps, "expected KEY = VALUE");
        STK_TRY(entry(ps, key, o, known));
        skip_space(ps);
        if (*ps->p && *ps->p != '\n') return bad(ps, "text after a value");
    }
}

int stk_config_flags(const char *path, const char *flags_of, config_known known, char ***out,
                     int *n)
{
    *out = NULL;
    *n = 0;
    uint8_t *data;
    size_t len;
    stk_status rd = stk_file_read_all(path, 1 << 20, &data, &len);
    if (rd != STK_OK) {
        stk_error_prefix(rd, "--config %s", path);
        return STK_EXIT_USAGE;
    }
    char *text = realloc(data, len + 1);
    if (!text) {
        free(data);
        stk_error(STK_ERR_NOMEM, "out of memory");
        return STK_EXIT_USAGE;
    }
    text[len] = '\0';
    size_t pl = strlen(path);
    bool toml = pl > 5 && !strcmp(path + pl - 5, ".toml");
    bool json = pl > 5 && !strcmp(path + pl - 5, ".json");
    flags_out o = {0};
    stk_status st;
    if (!toml && !json)
        st = stk_error(STK_ERR_INVALID_ARG, "--config %s: a .json or a .toml file", path);
    else {
        parser ps = {path, text, text, flags_of};
        st = toml ? parse_toml(&ps, &o, known) : parse_json(path, flags_of, text, len, &o, known);
    }
    free(text);
    if (st != STK_OK) {
        for (int i = 0; i < o.n; i++) free(o.v[i]);
        free(o.v);
        return STK_EXIT_USAGE;
    }
    *out = o.v;
    *n = o.n;
    return -1;
}

void stk_config_free(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

/* argv with every --config FILE's flags first, in the order given (a later
 * file's flag after an earlier's, the command line's after both), owned:
 * *eff, *n_eff; or *eff NULL when there is none. -1 to go on, or the exit
 * code. */
int stk_config_expand(const char *cmd, const char *flags_of, int argc, char **argv,
                      config_known known, char ***eff, int *n_eff)
{
    *eff = NULL;
    char **v = NULL;
    int m = 0;
    bool any = false;
    for (int pass = 0; pass < 2; pass++) { /* the files' flags, then argv's others */
        if (pass == 1 && !any) return -1;
        for (int i = 1; i < argc; i++) {
            const char *path = !strcmp(argv[i], "--config") && i + 1 < argc ? argv[i + 1]
                               : !strncmp(argv[i], "--config=", 9)          ? argv[i] + 9
                                                                            : NULL;
            int skip = !path ? 0 : argv[i][8] == '=' ? 1 : 2;
            if (pass == 1) {
                if (skip)
                    i += skip - 1;
                else if (!(v[m++] = strdup(argv[i])))
                    goto nomem;
                continue;
            }
            if (!path) continue;
            char **file_flags;
            int n;
            if (stk_config_flags(path, flags_of, known, &file_flags, &n) >= 0) {
                stk_config_free(v, m);
                return stk_cli_usage(cmd, "%s", stk_last_error());
            }
            char **grown = realloc(v, (size_t)(m + n + argc + 1) * sizeof *v);
            if (!grown) {
                for (int k = 0; k < n; k++) free(file_flags[k]);
                free(file_flags);
                goto nomem;
            }
            v = grown;
            if (!any && !(v[m++] = strdup(argv[0]))) {
                free(file_flags);
                goto nomem;
            }
            any = true;
            for (int k = 0; k < n; k++) v[m++] = file_flags[k];
            free(file_flags);
            i += skip - 1;
        }
    }
    v[m] = NULL;
    *eff = v;
    *n_eff = m;
    return -1;
nomem:
    stk_config_free(v, m);
    return stk_cli_fail();
}
