#include "common/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[STK_ERROR_MAX];

const char *stk_last_error(void) { return last_error; }

stk_status stk_error(stk_status st, const char *fmt, ...)
{
    /* through a copy: the arguments may include stk_last_error() itself */
    char text[STK_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    memcpy(last_error, text, sizeof last_error);
    return st;
}

stk_status stk_error_prefix(stk_status st, const char *fmt, ...)
{
    char prefix[STK_ERROR_MAX];
    char old[STK_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* Truncation is fine: the message is for people, and the start matters most. */
    size_t n = strlen(prefix);
    if (n > sizeof last_error - 3) n = sizeof last_error - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t rest = sizeof last_error - n - 3;
    size_t m = strnlen(old, rest);
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return st;
}

void stk_error_clear(void) { last_error[0] = '\0'; }

const char *stk_status_name(stk_status st)
{
    switch (st) {
    case STK_OK: return "ok";
    case STK_END: return "end";
    case STK_AGAIN: return "not yet";
    case STK_ERR_INVALID_ARG: return "invalid argument";
    case STK_ERR_NOMEM: return "out of memory";
    case STK_ERR_IO: return "i/o error";
    case STK_ERR_CORRUPT: return "corrupt data";
    case STK_ERR_UNSUPPORTED: return "unsupported";
    case STK_ERR_FORMAT: return "wrong format";
    case STK_ERR_CUDA: return "cuda error";
    case STK_ERR_CANCELLED: return "cancelled";
    case STK_ERR_LIMIT: return "limit exceeded";
    case STK_ERR_INTERNAL: return "internal error";
    case STK_ERR_DIVERGED: return "training diverged";
    case STK_ERR_BUSY: return "in use by another process";
    }
    return "unknown status";
}
