/* Levelled logging to stderr.
 *
 * The level comes from the STOKE_LOG environment variable (debug, info, warn,
 * error; default info) the first time a message is logged, or from
 * stk_log_set_level(). Messages read "stoke: warning: <text>".
 *
 *     stk_log_warn("%s: class folder is empty", name);
 *
 * Thread-safe: each message is written with a single fputs call.
 * Library code logs warnings and debug detail only; errors travel as stk_status.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_log_level {
    STK_LOG_DEBUG = 0,
    STK_LOG_INFO = 1,
    STK_LOG_WARN = 2,
    STK_LOG_ERROR = 3,
    STK_LOG_OFF = 4,
} stk_log_level;

void stk_log_set_level(stk_log_level level);
stk_log_level stk_log_get_level(void);

/* Parse "debug" / "info" / "warn" / "error" / "off"; returns -1 if unknown. */
int stk_log_parse_level(const char *name);

void stk_log(stk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define stk_log_debug(...) stk_log(STK_LOG_DEBUG, __VA_ARGS__)
#define stk_log_info(...)  stk_log(STK_LOG_INFO, __VA_ARGS__)
#define stk_log_warn(...)  stk_log(STK_LOG_WARN, __VA_ARGS__)
#define stk_log_error(...) stk_log(STK_LOG_ERROR, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
