#include "tools/cli.h"

#include "common/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

volatile sig_atomic_t stk_cli_interrupted = 0;

int stk_cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "stoke %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'stoke help %s'.\n", cmd);
    return STK_EXIT_USAGE;
}

int stk_cli_fail(void)
{
    const char *why = stk_last_error();
    fprintf(stderr, "stoke: %s\n", why[0] ? why : "failed, and no reason was recorded (a bug)");
    return stk_cli_interrupted ? STK_EXIT_INTERRUPTED : STK_EXIT_ERROR;
}

static void on_interrupt(int sig)
{
    (void)sig;
    if (stk_cli_interrupted) _Exit(130); /* a second Ctrl-C: the user insists */
    stk_cli_interrupted = 1;
}

void stk_cli_catch_interrupt(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    /* Restart interrupted system calls: the flag is polled between chunks of
     * work, and LMDB's writes must not fail with EINTR meanwhile. */
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

const char *stk_cli_bytes(uint64_t bytes, char *buf, size_t size)
{
    if (bytes >= (uint64_t)1 << 30)
        snprintf(buf, size, "%.2f GB", (double)bytes / 1e9);
    else if (bytes >= 1000000)
        snprintf(buf, size, "%.1f MB", (double)bytes / 1e6);
    else if (bytes >= 1000)
        snprintf(buf, size, "%.1f kB", (double)bytes / 1e3);
    else
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    return buf;
}
