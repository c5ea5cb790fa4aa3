/* JSON string escaping (json.h). */
#include "common/json.h"

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

void stk_json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char buf[8];
        const char *e = stk_json_escape(*p, buf);
        if (e)
            fputs(e, f);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}
