/* Strings built to their full length, never cut to a fixed buffer; and the
 * "did you mean" of a mistyped name.
 *
 *     char *path = stk_text_printf("%s/last.safetensors", out_dir);
 *     if (!path) return stk_error(STK_ERR_NOMEM, "out of memory");
 *     ...
 *     free(path);
 *
 *     const char *names[] = {"batch", "epochs", "lr"};
 *     const char *hint = stk_text_closest("batch-size", 10, names, 3);   // "batch"
 */
#pragma once

#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A malloc'd string formatted as printf would; NULL when out of memory.
 * The caller frees it. */
char *stk_text_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable string: stk_strbuf_printf appends as printf would; on a
 * failed allocation `failed` is set and later appends do nothing. Start it
 * zeroed; free(b.s) when done (s is NULL until something was appended). */
typedef struct stk_strbuf {
    char *s;
    size_t len, cap;
    bool failed;
} stk_strbuf;
void stk_strbuf_printf(stk_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Edit distance between word[0..len) and name: insertions, deletions,
 * substitutions and swaps of neighbours count 1 each (optimal string
 * alignment); case is ignored. Words of over 63 characters: a large number. */
size_t stk_text_distance(const char *word, size_t len, const char *name);

/* The name of names[0..n) that word[0..len) most likely means: the nearest
 * within max(2, len / 3) edits, or one that a '-' or '_' separated word
 * starts with ("batch-size" -> "batch"); words of under 4 characters
 * within 1 edit. NULL when none is close. */
const char *stk_text_closest(const char *word, size_t len, const char *const *names, int n);

/* x as the shortest %g text that reads back as x (0.1, not
 * 0.10000000000000001): what a setting's value is written and compared as.
 * buf holds 32 bytes or more. Returns buf. */
const char *stk_text_shortest(double x, char *buf, size_t size);

/* s as one CSV field (RFC 4180): quoted, its quotes doubled, when it holds a
 * comma, a quote or a line break. */
void stk_csv_write_field(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
