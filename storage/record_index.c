#include "storage/record_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

stk_status stk_find_mapping(const void *ptr, uintptr_t *start, uint64_t *file_offset)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return stk_error(STK_ERR_IO, "cannot read /proc/self/maps: %s", strerror(errno));
    char line[4096];
    uintptr_t p = (uintptr_t)ptr;
    stk_status st = stk_error(STK_ERR_INTERNAL, "no mapping of the dataset file found for %p", ptr);
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        uint64_t off;
        /* "lo-hi perms offset major:minor inode path" */
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %" SCNx64, &lo, &hi, &off) != 3) continue;
        if (p < lo || p >= hi) continue;
        *start = lo;
        *file_offset = off;
        st = STK_OK;
        break;
    }
    fclose(f);
    return st;
}
