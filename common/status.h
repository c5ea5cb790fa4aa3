/* Status codes and the thread-local last-error message.
 *
 * Every fallible public function in Stoke returns stk_status: STK_OK (0) on
 * success, a negative code grouped by kind on failure, and a positive code for
 * non-error outcomes such as the end of an epoch. On failure it also sets a
 * message, read with stk_last_error(), that names the file, record or flag
 * and the reason.
 *
 *     stk_dataset *ds;
 *     stk_status st = stk_dataset_open("train.stoke", &ds);
 *     if (st != STK_OK) {
 *         fprintf(stderr, "stoke: %s\n", stk_last_error());
 *         return 1;
 *     }
 *
 * The contract (as DALI's daliGetLastErrorMessage states its own):
 *   - Test a status with `!= STK_OK` (or `stk_failed(st)`, which is true for
 *     the negative codes only: STK_END and STK_AGAIN are outcomes, not errors).
 *   - The message is set only by a failure; success never clears it, so read
 *     it right after the failing call (a later failure replaces it).
 *   - stk_last_error() points into thread-local storage: valid until the
 *     thread's next failure (or stk_error_clear) and for the thread's life;
 *     copy it to keep it longer or to hand it to another thread.
 *   - Messages are UTF-8 text of at most STK_ERROR_MAX - 1 bytes, truncated
 *     at the end (the start names what failed).
 *
 * Threading: the message is per thread; a worker's error is carried to the
 * caller's thread by copying the text and setting it there with
 * stk_error(st, "%s", saved).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_status {
    STK_OK = 0,
    STK_END = 1,   /* not an error: nothing more (end of epoch, end of list) */
    STK_AGAIN = 2, /* not an error: nothing yet (a bounded wait ran out) */

    STK_ERR_INVALID_ARG = -1, /* a bad flag, argument or API misuse */
    STK_ERR_NOMEM = -2,
    STK_ERR_IO = -3,          /* a system call failed: errno text in the message */
    STK_ERR_CORRUPT = -4,     /* the data is damaged: bad CRC, header, truncated */
    STK_ERR_UNSUPPORTED = -5, /* valid, but not something Stoke handles */
    STK_ERR_FORMAT = -6,      /* not the expected kind of file / wrong version */
    STK_ERR_CUDA = -7,
    STK_ERR_CANCELLED = -8, /* stopped by the user (SIGINT) or by the caller */
    STK_ERR_LIMIT = -9,     /* refused by a limit (pixel count, map size, ...) */
    STK_ERR_INTERNAL = -10,
    STK_ERR_DIVERGED = -11, /* training produced a loss or parameter that is not finite */
    STK_ERR_BUSY = -12,     /* held by another process (a run folder's lock) */
} stk_status;

/* True for the error codes (negative): STK_END and STK_AGAIN are not errors. */
static inline bool stk_failed(stk_status st) { return st < 0; }

/* The message of the last error set on this thread ("" when none). */
const char *stk_last_error(void);

/* Set this thread's message (printf format) and return `st`, so that error
 * paths read `return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));`.
 * The arguments may include stk_last_error() (to reword or extend it). */
stk_status stk_error(stk_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix this thread's current message with "prefix: " (keeps the status). */
stk_status stk_error_prefix(stk_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clear this thread's message. */
void stk_error_clear(void);

/* Short name of a status ("io error", "corrupt data", ...). */
const char *stk_status_name(stk_status st);

/* Maximum length of a message, including the terminating NUL. */
#define STK_ERROR_MAX 1024

/* Status-checking helper for code that chains fallible calls:
 * STK_TRY(call) returns the call's status from the enclosing function on error. */
#define STK_TRY(call)                                                                                  \
    do {                                                                                           \
        stk_status try_st_ = (call);                                                               \
        if (try_st_ != STK_OK) return try_st_;                                                     \
    } while (0)

#ifdef __cplusplus
}
#endif
