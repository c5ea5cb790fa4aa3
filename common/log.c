#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int current_level = -1; /* -1: not read from the environment yet */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

int stk_log_parse_level(const char *name)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++)
        if (strcmp(name, names[i]) == 0) return i;
    if (strcmp(name, "warning") == 0) return STK_LOG_WARN;
    return -1;
}

static void read_env(void)
{
    const char *env = getenv("STOKE_LOG");
    int level = env ? stk_log_parse_level(env) : -1;
    if (env && level < 0)
        fprintf(stderr, "stoke: warning: STOKE_LOG=%s is not one of debug, info, warn, error\n",
                env);
    if (__atomic_load_n(&current_level, __ATOMIC_RELAXED) < 0)
        __atomic_store_n(&current_level, level < 0 ? STK_LOG_INFO : level, __ATOMIC_RELAXED);
}

void stk_log_set_level(stk_log_level level)
{
    pthread_once(&env_once, read_env);
    __atomic_store_n(&current_level, (int)level, __ATOMIC_RELAXED);
}

stk_log_level stk_log_get_level(void)
{
    pthread_once(&env_once, read_env);
    return (stk_log_level)__atomic_load_n(&current_level, __ATOMIC_RELAXED);
}

void stk_log(stk_log_level level, const char *fmt, ...)
{
    if (level < stk_log_get_level()) return;
    static const char *prefix[] = {"debug: ", "", "warning: ", "error: "};
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "stoke: %s", prefix[level < 4 ? level : 3]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(msg);
    msg[len] = '\n';
    msg[len + 1] = '\0';
    fputs(msg, stderr);
}
