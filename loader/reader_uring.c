/* The io_uring backend: one ring per reader (per worker thread), all reads of
 * a call submitted at once, waited for together. */
#include "loader/record_reader.h"

#include "common/log.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

struct stk_uring_reader {
    struct io_uring ring;
    uint8_t *const *bufs;
    bool fixed_buffers; /* buffers registered: IORING_OP_READ_FIXED */
    int depth;
};

static int buffers_warned;

stk_status stk_uring_reader_create(int fd, uint8_t *const *bufs, size_t buf_size, int depth,
                                   stk_uring_reader **out)
{
    *out = NULL;
    stk_uring_reader *u = calloc(1, sizeof *u);
    if (!u) return stk_error(STK_ERR_NOMEM, "out of memory");
    int rc = io_uring_queue_init((unsigned)depth, &u->ring, 0);
    if (rc < 0) {
        free(u);
        return stk_error(STK_ERR_UNSUPPORTED, "io_uring cannot be set up: %s", strerror(-rc));
    }
    u->bufs = bufs;
    u->depth = depth;
    /* A registered file saves a file-table lookup per read. */
    if (io_uring_register_files(&u->ring, &fd, 1) < 0) {
        io_uring_queue_exit(&u->ring);
        free(u);
        return stk_error(STK_ERR_UNSUPPORTED, "io_uring cannot register the dataset file");
    }
    /* Registered buffers save pinning pages per read, but count against
     * RLIMIT_MEMLOCK: without them, reads still work. */
    struct iovec *iov = calloc((size_t)depth, sizeof *iov);
    if (iov) {
        for (int i = 0; i < depth; i++) iov[i] = (struct iovec){bufs[i], buf_size};
        rc = io_uring_register_buffers(&u->ring, iov, (unsigned)depth);
        u->fixed_buffers = rc == 0;
        if (rc < 0 && !__atomic_exchange_n(&buffers_warned, 1, __ATOMIC_RELAXED))
            stk_log_info("io_uring: buffers not registered (%s); reading into plain buffers",
                         strerror(-rc));
        free(iov);
    }
    *out = u;
    return STK_OK;
}

void stk_uring_reader_destroy(stk_uring_reader *u)
{
    if (!u) return;
    io_uring_queue_exit(&u->ring);
    free(u);
}

void stk_uring_reader_read(stk_uring_reader *u, const uint64_t *off, const size_t *len, int n,
                           int64_t *res)
{
    int submitted = 0;
    for (int i = 0; i < n; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
        if (!sqe) { /* cannot happen with n <= depth; be safe */
            res[i] = -EBUSY;
            continue;
        }
        if (u->fixed_buffers)
            io_uring_prep_read_fixed(sqe, 0, u->bufs[i], (unsigned)len[i], off[i], i);
        else
            io_uring_prep_read(sqe, 0, u->bufs[i], (unsigned)len[i], off[i]);
        sqe->flags |= IOSQE_FIXED_FILE;
        io_uring_sqe_set_data64(sqe, (uint64_t)i);
        submitted++;
    }
    int rc = io_uring_submit(&u->ring);
    if (rc < 0) {
        for (int i = 0; i < n; i++) res[i] = rc;
        return;
    }
    for (int done = 0; done < submitted; done++) {
        struct io_uring_cqe *cqe;
        do rc = io_uring_wait_cqe(&u->ring, &cqe);
        while (rc == -EINTR);
        if (rc < 0) {
            for (int i = 0; i < n; i++) res[i] = rc;
            return;
        }
        uint64_t i = io_uring_cqe_get_data64(cqe);
        if (i < (uint64_t)n) res[i] = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
    }
}
