#include "loader/dataset_files.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void stk_dataset_fds_close(int *fds, int n)
{
    for (int k = 0; fds && k < n; k++)
        if (fds[k] >= 0) close(fds[k]);
    free(fds);
}

stk_status stk_dataset_fds_open(const stk_dataset *ds, bool *direct, bool random, int **out)
{
    int n = stk_dataset_file_count(ds);
    int *fds = malloc((size_t)n * sizeof *fds);
    if (!fds) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n; k++) fds[k] = -1;
    for (int k = 0; k < n; k++) {
        const char *path = stk_dataset_file_path(ds, k);
        fds[k] = open(path, O_RDONLY | O_CLOEXEC | (*direct ? O_DIRECT : 0));
        if (fds[k] < 0 && *direct) {
            stk_log_warn("%s: O_DIRECT not possible (%s); reading through the page cache", path,
                         strerror(errno));
            *direct = false;
            stk_dataset_fds_close(fds, n);
            return stk_dataset_fds_open(ds, direct, random, out);
        }
        if (fds[k] < 0) {
            stk_status st = stk_error(STK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
            stk_dataset_fds_close(fds, n);
            return st;
        }
        /* Kernel readahead around each record read in a shuffled order would
         * read pages nobody asked for (as LMDB's MDB_NORDAHEAD avoids for the
         * map). */
        if (random) posix_fadvise(fds[k], 0, 0, POSIX_FADV_RANDOM);
    }
    *out = fds;
    return STK_OK;
}

int64_t stk_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) break;
        got += (size_t)n;
    }
    return (int64_t)got;
}
