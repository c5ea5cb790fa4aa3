/* JSON string escaping and numbers (json.h). */
#include "common/json.h"

#include "common/fs.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *stk_json_escape(unsigned char c, char esc[8])
{
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    default: break;
    }
    if (c >= 0x20) return NULL;
    snprintf(esc, 8, "\\u%04x", c);
    return esc;
}

/* Length of the UTF-8 sequence starting at p if it is well-formed, else 0. */
static size_t utf8_sequence(const unsigned char *p)
{
    size_t n = *p < 0xC0 ? 0 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : *p < 0xF5 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if (!p[i]) return 0; /* the string ends inside the sequence */
    return n && stk_utf8_valid((const char *)p, n) ? n : 0;
}

void stk_json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char buf[8];
        const char *e = stk_json_escape(*p, buf);
        if (e) {
            fputs(e, f);
        } else if (*p < 0x80) {
            fputc(*p, f);
        } else {
            size_t n = utf8_sequence(p);
            if (n) {
                fwrite(p, 1, n, f);
                p += n - 1;
            } else {
                fputs("\\ufffd", f); /* not UTF-8: JSON text must be */
            }
        }
    }
    fputc('"', f);
}

const char *stk_json_number(double x, int decimals, char buf[STK_JSON_NUMBER])
{
    if (!isfinite(x)) return "null";
    snprintf(buf, STK_JSON_NUMBER, "%.*f", decimals, x);
    return buf;
}

char *stk_json_string_array(char *const *items, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        stk_json_write_string(f, items[i]);
    }
    fputc(']', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void stk_json_strings_free(char **items, int n)
{
    for (int i = 0; items && i < n; i++) free(items[i]);
    free(items);
}

stk_status stk_json_load(const char *text, size_t len, struct json_t **out)
{
    /* Duplicate keys refused (two tensors, two flags of one name: which
     * one counts would be the parser's choice); jansson refuses \u0000 and
     * lone surrogates, and text after the value, by default. */
    json_error_t e;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (*out) return STK_OK;
    if (json_error_code(&e) == json_error_out_of_memory)
        return stk_error(STK_ERR_NOMEM, "no memory for JSON");
    return stk_error(STK_ERR_FORMAT, "line %d, column %d: %s", e.line, e.column, e.text);
}

bool stk_json_parse_string_array(const char *text, int max, char ***items, int *n)
{
    *items = NULL;
    *n = 0;
    json_t *a;
    if (stk_json_load(text, strlen(text), &a) != STK_OK) return false;
    size_t k = json_is_array(a) ? json_array_size(a) : 0;
    char **v = k ? calloc(k, sizeof *v) : NULL;
    bool ok = json_is_array(a) && k <= (size_t)max && (k == 0 || v);
    for (size_t i = 0; ok && i < k; i++) {
        const json_t *s = json_array_get(a, i);
        ok = json_is_string(s) && (v[i] = strdup(json_string_value(s))) != NULL;
    }
    json_decref(a);
    if (!ok) {
        stk_json_strings_free(v, (int)k);
        return false;
    }
    *items = v;
    *n = (int)k;
    return true;
}
