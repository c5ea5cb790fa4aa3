/* JSON string escaping and numbers (json.h). */
#include "common/json.h"

#include "common/fs.h"

#include <math.h>
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
