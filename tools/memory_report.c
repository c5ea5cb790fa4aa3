#include "tools/memory_report.h"

#include <stdlib.h>

#define MAX_CLASSES 512

/* "4 KiB", "1.5 MiB": a size for a column. */
static const char *human(uint64_t bytes, char *buf, size_t n)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, n, v == (double)(uint64_t)v ? "%.0f %s" : "%.1f %s", v, unit[u]);
    return buf;
}

/* Size classes are grouped by power of two: (2^(k-1), 2^k], and <= 4 KiB. */
static int group_of(size_t size)
{
    if (size <= 4096) return 12;
    int k = 63 - __builtin_clzll((unsigned long long)size);
    return ((size_t)1 << k) == size ? k : k + 1;
}

void memory_report_print(FILE *f, stk_device dev, uint64_t run_peak)
{
    stk_mem_stats s;
    stk_device_mem_stats(dev, &s);
    stk_mem_class *c = malloc(MAX_CLASSES * sizeof *c);
    if (!c) return;
    int n = stk_device_mem_classes(dev, c, MAX_CLASSES);
    if (n > MAX_CLASSES) n = MAX_CLASSES;
    char a[32], b[32], p[32];
    fprintf(f,
            "memory report: %s caching allocator: %s allocated, %s reserved, peak %s; "
            "%llu allocations, %llu from the system\n",
            stk_device_name(dev), human(s.allocated, a, sizeof a), human(s.reserved, b, sizeof b),
            human(run_peak > s.peak_allocated ? run_peak : s.peak_allocated, p, sizeof p),
            (unsigned long long)s.n_alloc, (unsigned long long)s.n_fresh);
    fprintf(f, "  %-22s %9s %11s %9s %11s %12s %11s\n", "size class", "in use", "bytes", "cached",
            "bytes", "allocations", "from system");
    for (int i = 0; i < n;) {
        int g = group_of(c[i].size);
        uint64_t live = 0, live_b = 0, cached = 0, cached_b = 0, allocs = 0, fresh = 0;
        for (; i < n && group_of(c[i].size) == g; i++) {
            live += c[i].live;
            live_b += c[i].live * c[i].size;
            cached += c[i].cached;
            cached_b += c[i].cached * c[i].size;
            allocs += c[i].n_alloc;
            fresh += c[i].n_fresh;
        }
        char label[80], lo[32], hi[32];
        if (g == 12)
            snprintf(label, sizeof label, "<= 4 KiB");
        else
            snprintf(label, sizeof label, "%s - %s", human((uint64_t)1 << (g - 1), lo, sizeof lo),
                     human((uint64_t)1 << g, hi, sizeof hi));
        fprintf(f, "  %-22s %9llu %11s %9llu %11s %12llu %11llu\n", label, (unsigned long long)live,
                human(live_b, a, sizeof a), (unsigned long long)cached,
                human(cached_b, b, sizeof b), (unsigned long long)allocs,
                (unsigned long long)fresh);
    }
    free(c);
}
