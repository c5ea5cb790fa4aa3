/* JSON string escaping, shared by every writer of JSON (safetensors headers,
 * the CLI's --json output), and the one JSON reader (stk_json_load).
 *
 *     char esc[8];
 *     const char *e = stk_json_escape(c, esc);   // NULL: c stands for itself
 *     stk_json_write_string(stdout, name);        // "name", quoted and escaped
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The escape sequence of byte c inside a JSON string (backslash-quote,
 * backslash-n, backslash-u0001, ...), possibly written into esc, or NULL
 * when c needs none. Bytes from 0x80 up pass through: UTF-8 stays as is. */
const char *stk_json_escape(unsigned char c, char esc[8]);

/* Write s to f as a JSON string literal (quoted, escaped). Bytes that are
 * not well-formed UTF-8 become U+FFFD: the output is always valid JSON. */
void stk_json_write_string(FILE *f, const char *s);

/* x with `decimals` decimals, or "null" when x is NaN or infinite (JSON has
 * neither): printf("%s", stk_json_number(x, 4, buf)). */
#define STK_JSON_NUMBER 352 /* room for %.*f of any double */
const char *stk_json_number(double x, int decimals, char buf[STK_JSON_NUMBER]);

/* A list of strings as a JSON array's text (malloc'd; NULL: no memory). */
char *stk_json_string_array(char *const *items, int n);

/* Parse a JSON array of strings (text as stk_json_string_array writes it,
 * any JSON spacing and escapes, \u surrogate pairs) into *items (n of them,
 * each malloc'd, NUL-terminated UTF-8; free with stk_json_strings_free).
 * false: not such an array, more than max items, an item with a NUL, or no
 * memory (*items NULL, *n 0). */
bool stk_json_parse_string_array(const char *text, int max, char ***items, int *n);
void stk_json_strings_free(char **items, int n);

/* Parse JSON text of len bytes with jansson (Debian's libjansson), the one
 * JSON reader: safetensors headers, checkpoint metadata's string arrays,
 * tune's --config. Duplicate keys, \u0000, lone surrogates and text after
 * the value are refused. *out: free with json_decref. Errors: FORMAT
 * "line L, column C: REASON", NOMEM. */
struct json_t;
stk_status stk_json_load(const char *text, size_t len, struct json_t **out);

#ifdef __cplusplus
}
#endif
