/* JSON string escaping and numbers (json.h). */
#include "common/json.h"

#include "common/fs.h"

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

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Four hex digits at p (none read at or past end), or -1. */
static long hex4(const char *p, const char *end)
{
    if (end - p < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

int stk_json_unicode_escape(const char *p, const char *end, char out[4], size_t *used)
{
    long u = hex4(p, end);
    *used = 4;
    if (u < 0) return -1;
    if (u >= 0xd800 && u < 0xdc00) { /* a surrogate pair: \uD83D\uDE00 */
        long lo = end - p >= 6 && p[4] == '\\' && p[5] == 'u' ? hex4(p + 6, end) : -1;
        if (lo < 0xdc00 || lo >= 0xe000) return -1;
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        *used = 10;
    } else if ((u >= 0xdc00 && u < 0xe000) || u == 0) { /* a lone low half; NUL ends a C string */
        return -1;
    }
    if (u < 0x80) {
        out[0] = (char)u;
        return 1;
    }
    if (u < 0x800) {
        out[0] = (char)(0xc0 | u >> 6);
        out[1] = (char)(0x80 | (u & 0x3f));
        return 2;
    }
    if (u < 0x10000) {
        out[0] = (char)(0xe0 | u >> 12);
        out[1] = (char)(0x80 | ((u >> 6) & 0x3f));
        out[2] = (char)(0x80 | (u & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | u >> 18);
    out[1] = (char)(0x80 | ((u >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((u >> 6) & 0x3f));
    out[3] = (char)(0x80 | (u & 0x3f));
    return 4;
}

/* One string literal at *p (its opening quote) into a malloc'd buffer. */
static char *string_at(const char **pp)
{
    const char *p = *pp + 1;
    size_t cap = strlen(p) + 1, n = 0; /* escapes only shrink */
    char *out = malloc(cap);
    if (!out) return NULL;
    while (*p && *p != '"') {
        unsigned char c = (unsigned char)*p++;
        if (c < 0x20) goto bad;
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        char e = *p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            out[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u') goto bad;
        size_t used;
        int k = stk_json_unicode_escape(p, p + strnlen(p, 10), out + n, &used);
        if (k < 0) goto bad;
        p += used;
        n += (size_t)k;
    }
    if (*p != '"') goto bad;
    out[n] = '\0';
    *pp = p + 1;
    return out;
bad:
    free(out);
    return NULL;
}

bool stk_json_parse_string_array(const char *text, int max, char ***items, int *n)
{
    *items = NULL;
    *n = 0;
    const char *p = skip_space(text);
    if (*p++ != '[') return false;
    char **v = NULL;
    int k = 0;
    p = skip_space(p);
    if (*p == ']') {
        p = skip_space(p + 1);
        return *p == '\0';
    }
    for (;;) {
        if (*p != '"' || k >= max) goto bad;
        char **grown = realloc(v, (size_t)(k + 1) * sizeof *v);
        if (!grown) goto bad;
        v = grown;
        if (!(v[k] = string_at(&p))) goto bad;
        k++;
        p = skip_space(p);
        if (*p == ']') break;
        if (*p++ != ',') goto bad;
        p = skip_space(p);
    }
    if (*skip_space(p + 1) != '\0') goto bad;
    *items = v;
    *n = k;
    return true;
bad:
    stk_json_strings_free(v, k);
    return false;
}
