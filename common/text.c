#include "common/text.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *stk_text_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

size_t stk_text_distance(const char *word, size_t len, const char *name)
{
    enum { MAX = 64 };
    size_t m = strlen(name);
    if (len >= MAX || m >= MAX) return (size_t)-1 / 2;
    size_t d[MAX][MAX];
    for (size_t i = 0; i <= len; i++) d[i][0] = i;
    for (size_t j = 0; j <= m; j++) d[0][j] = j;
    for (size_t i = 1; i <= len; i++)
        for (size_t j = 1; j <= m; j++) {
            int a = tolower((unsigned char)word[i - 1]), b = tolower((unsigned char)name[j - 1]);
            size_t best = d[i - 1][j - 1] + (a != b);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a == tolower((unsigned char)name[j - 2]) &&
                tolower((unsigned char)word[i - 2]) == b && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[len][m];
}

const char *stk_text_closest(const char *word, size_t len, const char *const *names, int n)
{
    const char *best = NULL;
    size_t best_d = (len < 4 ? 1 : len / 3 > 2 ? len / 3 : 2) + 1; /* short words: 1 edit */
    for (int i = 0; i < n; i++) {
        size_t d = stk_text_distance(word, len, names[i]), k = strlen(names[i]);
        /* "batch-size" means "batch": a whole first part of the word */
        if (k >= 2 && k < len && (word[k] == '-' || word[k] == '_') &&
            strncasecmp(word, names[i], k) == 0 && d > 1)
            d = 1;
        if (d < best_d) best = names[i], best_d = d;
    }
    return best;
}

void stk_csv_write_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void stk_strbuf_printf(stk_strbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

const char *stk_text_shortest(double x, char *buf, size_t size)
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}
