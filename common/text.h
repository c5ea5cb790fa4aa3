/* Strings built to their full length, never cut to a fixed buffer.
 *
 *     char *path = stk_text_printf("%s/last.safetensors", out_dir);
 *     if (!path) return stk_error(STK_ERR_NOMEM, "out of memory");
 *     ...
 *     free(path);
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* A malloc'd string formatted as printf would; NULL when out of memory.
 * The caller frees it. */
char *stk_text_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif
