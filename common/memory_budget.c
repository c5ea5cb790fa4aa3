#include "common/memory_budget.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first number after `key` in file `path` (key NULL: the file's first
 * number); UINT64_MAX when absent or "max". */
static uint64_t read_number(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return UINT64_MAX;
    char line[256];
    uint64_t v = UINT64_MAX;
    size_t klen = key ? strlen(key) : 0;
    while (fgets(line, sizeof line, f)) {
        if (key && (strncmp(line, key, klen) || line[klen] != ' ')) continue;
        if (sscanf(line + klen, " %" SCNu64, &v) != 1) v = UINT64_MAX;
        break;
    }
    fclose(f);
    return v;
}

static uint64_t cgroup_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return UINT64_MAX;
    char line[1024], v1[1024] = "", v2[1024] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *b = '\0';
        if (!strcmp(a + 1, "memory")) snprintf(v1, sizeof v1, "%s", b + 1);
        if (a[1] == '\0' && !strcmp(line, "0")) snprintf(v2, sizeof v2, "%s", b + 1);
    }
    fclose(f);
    uint64_t limit = UINT64_MAX;
    char path[1200];
    if (v1[0]) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.stat",
                 strcmp(v1, "/") ? v1 : "");
        limit = read_number(path, "hierarchical_memory_limit");
    }
    /* v2: this cgroup and each ancestor (unified or hybrid mount) */
    for (const char *root = "/sys/fs/cgroup"; v2[0] && root;
         root = strcmp(root, "/sys/fs/cgroup") ? NULL : "/sys/fs/cgroup/unified") {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", v2);
        for (;;) {
            snprintf(path, sizeof path, "%s%s/memory.max", root, strcmp(dir, "/") ? dir : "");
            uint64_t v = read_number(path, NULL);
            if (v < limit) limit = v;
            char *slash = strrchr(dir, '/');
            if (!slash || slash == dir) break;
            *slash = '\0';
        }
    }
    return limit;
}

/* STOKE_MEMORY_LIMIT_MB in MiB, or 0 when unset or not a number above 0. */
static double env_limit_mb(void)
{
    const char *env = getenv("STOKE_MEMORY_LIMIT_MB");
    char *end = NULL;
    double mb = env ? strtod(env, &end) : 0;
    return env && end != env && !*end && mb > 0 && isfinite(mb) ? mb : 0;
}

stk_status stk_memory_limit_env_check(void)
{
    const char *env = getenv("STOKE_MEMORY_LIMIT_MB");
    if (!env || env_limit_mb() > 0) return STK_OK;
    char shown[64];
    snprintf(shown, sizeof shown, "%s", env);
    return stk_error(STK_ERR_INVALID_ARG,
                     "STOKE_MEMORY_LIMIT_MB=%s: expected a number of MiB above 0 (or unset it)",
                     shown);
}

uint64_t stk_memory_budget(char *why, size_t size)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t budget = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    const char *from = "the machine's memory";
    uint64_t cg = cgroup_limit();
    if (cg < budget) {
        budget = cg;
        from = "the memory cgroup's limit";
    }
    /* a share of the machine the kernel does not know of (another job's
     * memory, a scheduler's allotment); also how the tests set one */
    double mb = env_limit_mb();
    if (mb > 0 && mb * 1048576.0 < (double)budget) {
        budget = (uint64_t)(mb * 1048576.0);
        from = "STOKE_MEMORY_LIMIT_MB";
    }
    if (why) snprintf(why, size, "%s", from);
    return budget;
}
