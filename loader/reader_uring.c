/* The io_uring backend: one ring per reader (per worker thread). Reads are
 * submitted in sets and waited for by set, so a worker can have the next
 * chunk's reads in flight while it decodes the current one. */
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
    int nbufs;
    int64_t *res;  /* per buffer: bytes read or -errno */
    uint8_t *done; /* per buffer: its completion has arrived */
};

static int buffers_warned;

stk_status stk_uring_reader_create(const int *fds, int nfds, uint8_t *const *bufs, size_t buf_size,
                                   int nbufs, stk_uring_reader **out)
{
    *out = NULL;
    stk_uring_reader *u = calloc(1, sizeof *u);
    if (!u) return stk_error(STK_ERR_NOMEM, "out of memory");
    u->res = calloc((size_t)nbufs, sizeof *u->res);
    u->done = calloc((size_t)nbufs, 1);
    if (!u->res || !u->done) {
        free(u->res);
        free(u->done);
        free(u);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    int rc = io_uring_queue_init((unsigned)nbufs, &u->ring, 0);
    if (rc < 0) {
        free(u->res);
        free(u->done);
        free(u);
        return stk_error(STK_ERR_UNSUPPORTED, "io_uring cannot be set up: %s", strerror(-rc));
    }
    u->bufs = bufs;
    u->nbufs = nbufs;
    /* Registered files save a file-table lookup per read. */
    if (io_uring_register_files(&u->ring, fds, (unsigned)nfds) < 0) {
        stk_uring_reader_destroy(u);
        return stk_error(STK_ERR_UNSUPPORTED, "io_uring cannot register the dataset file");
    }
    /* Registered buffers save pinning pages per read, but count against
     * RLIMIT_MEMLOCK: without them, reads still work. */
    struct iovec *iov = calloc((size_t)nbufs, sizeof *iov);
    if (iov) {
        for (int i = 0; i < nbufs; i++) iov[i] = (struct iovec){bufs[i], buf_size};
        rc = io_uring_register_buffers(&u->ring, iov, (unsigned)nbufs);
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
    free(u->res);
    free(u->done);
    free(u);
}

void stk_uring_reader_submit(stk_uring_reader *u, int first, const int *file, const uint64_t *off,
                             const size_t *len, const bool *skip, int n)
{
    for (int i = 0; i < n; i++) {
        int b = first + i;
        u->done[b] = 1; /* until submitted */
        if (skip[i]) continue;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
        if (!sqe) { /* cannot happen: the ring has an entry per buffer */
            u->res[b] = -EBUSY;
            continue;
        }
        if (u->fixed_buffers)
            io_uring_prep_read_fixed(sqe, file[i], u->bufs[b], (unsigned)len[i], off[i], b);
        else
            io_uring_prep_read(sqe, file[i], u->bufs[b], (unsigned)len[i], off[i]);
        sqe->flags |= IOSQE_FIXED_FILE;
        io_uring_sqe_set_data64(sqe, (uint64_t)b);
        u->done[b] = 0;
    }
    int rc = io_uring_submit(&u->ring);
    if (rc < 0) /* nothing went out: fail the reads of this set */
        for (int i = 0; i < n; i++)
            if (!u->done[first + i]) u->res[first + i] = rc, u->done[first + i] = 1;
}

void stk_uring_reader_wait(stk_uring_reader *u, int first, int n, int64_t *res)
{
    for (;;) {
        int missing = 0;
        for (int i = 0; i < n; i++) missing += !u->done[first + i];
        if (!missing) break;
        struct io_uring_cqe *cqe;
        int rc;
        do rc = io_uring_wait_cqe(&u->ring, &cqe);
        while (rc == -EINTR);
        if (rc < 0) { /* the ring is broken: fail what is left of this set */
            for (int i = 0; i < n; i++)
                if (!u->done[first + i]) u->res[first + i] = rc, u->done[first + i] = 1;
            break;
        }
        uint64_t b = io_uring_cqe_get_data64(cqe);
        if (b < (uint64_t)u->nbufs) { /* may belong to the other set: kept for its wait */
            u->res[b] = cqe->res;
            u->done[b] = 1;
        }
        io_uring_cqe_seen(&u->ring, cqe);
    }
    for (int i = 0; i < n; i++) res[i] = u->res[first + i];
}
