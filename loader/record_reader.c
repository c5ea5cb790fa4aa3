/* Record reading: buffers, O_DIRECT alignment, the pread and mmap backends
 * and the dispatch to io_uring (reader_uring.c). */
#include "loader/record_reader.h"

#include "common/log.h"
#include "loader/dataset_files.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN 4096 /* O_DIRECT: offsets, lengths and buffers on this boundary */

struct stk_record_reader {
    const stk_dataset *ds;
    stk_io_backend io;
    bool direct;
    int *fds; /* our descriptor of each of the dataset's files (O_DIRECT with direct) */
    int nfds;
    int depth;
    size_t buf_size;
    uint8_t *arena; /* 2 x depth buffers of buf_size bytes, ALIGN-aligned: two sets */
    uint8_t **bufs;
    stk_uring_reader *uring;
    /* Per buffer: the file and the range read in it, the record's span (in
     * that file's offsets), the result. */
    int *file;
    uint64_t *off, *span_off;
    size_t *len;
    uint32_t *span_len;
    int64_t *res;
    bool *skip;
};

const char *stk_io_backend_name(stk_io_backend io)
{
    return io == STK_IO_URING ? "uring" : io == STK_IO_PREAD ? "pread" : "mmap";
}

int stk_io_backend_parse(const char *name)
{
    if (!strcmp(name, "uring")) return STK_IO_URING;
    if (!strcmp(name, "pread")) return STK_IO_PREAD;
    if (!strcmp(name, "mmap")) return STK_IO_MMAP;
    return -1;
}

static int notice_given;

stk_status stk_record_reader_create(const stk_dataset *ds, stk_io_backend io, bool direct,
                                    int depth, stk_record_reader **out, stk_io_backend *used)
{
    *out = NULL;
    if (depth < 1) depth = 1;
    stk_record_reader *r = calloc(1, sizeof *r);
    if (!r) return stk_error(STK_ERR_NOMEM, "out of memory");
    r->ds = ds;
    r->io = io;
    r->direct = direct && io != STK_IO_MMAP;
    r->depth = depth;
    stk_status st = STK_OK;
    /* Room for the largest record, plus alignment slack for O_DIRECT. */
    r->buf_size =
        ((size_t)stk_dataset_max_record_bytes(ds) + 2 * ALIGN + ALIGN - 1) / ALIGN * ALIGN;
    size_t nb = 2 * (size_t)depth;
    r->bufs = calloc(nb, sizeof *r->bufs);
    r->off = calloc(nb, sizeof *r->off);
    r->file = calloc(nb, sizeof *r->file);
    r->nfds = stk_dataset_file_count(ds);
    r->span_off = calloc(nb, sizeof *r->span_off);
    r->len = calloc(nb, sizeof *r->len);
    r->span_len = calloc(nb, sizeof *r->span_len);
    r->res = calloc(nb, sizeof *r->res);
    r->skip = calloc(nb, sizeof *r->skip);
    if (posix_memalign((void **)&r->arena, ALIGN, r->buf_size * nb)) r->arena = NULL;
    if (!r->bufs || !r->off || !r->file || !r->span_off || !r->len || !r->span_len || !r->res ||
        !r->skip || !r->arena) {
        st = stk_error(STK_ERR_NOMEM, "out of memory for %zu read buffers of %zu bytes", nb,
                       r->buf_size);
        goto fail;
    }
    for (size_t i = 0; i < nb; i++) r->bufs[i] = r->arena + i * r->buf_size;
    if ((st = stk_dataset_fds_open(ds, &r->direct, true, &r->fds)) != STK_OK) goto fail;
    if (io == STK_IO_MMAP) goto done; /* the descriptors serve fstat only */
    if (io == STK_IO_URING) {
        st = stk_uring_reader_create(r->fds, r->nfds, r->bufs, r->buf_size, 2 * depth, &r->uring);
        if (st != STK_OK) {
            if (!__atomic_exchange_n(&notice_given, 1, __ATOMIC_RELAXED))
                stk_log_warn("%s; reading with pread instead", stk_last_error());
            r->io = STK_IO_PREAD;
            st = STK_OK;
        }
    }
done:
    if (used) *used = r->io;
    *out = r;
    return STK_OK;
fail:
    stk_record_reader_destroy(r);
    return st;
}

void stk_record_reader_destroy(stk_record_reader *r)
{
    if (!r) return;
    stk_uring_reader_destroy(r->uring);
    stk_dataset_fds_close(r->fds, r->nfds);
    free(r->file);
    free(r->arena);
    free(r->bufs);
    free(r->off);
    free(r->span_off);
    free(r->len);
    free(r->span_len);
    free(r->res);
    free(r->skip);
    free(r);
}

static void fail_req(stk_read_req *q, stk_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_req(stk_read_req *q, stk_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->error, sizeof q->error, fmt, ap);
    va_end(ap);
    q->status = st;
    q->data = NULL;
    q->len = 0;
}

void stk_record_reader_submit(stk_record_reader *r, int set, stk_read_req *reqs, int n)
{
    if (n > r->depth) n = r->depth;
    int base = set ? r->depth : 0;
    for (int i = 0; i < n; i++) {
        stk_read_req *q = &reqs[i];
        int b = base + i;
        q->status = STK_OK;
        q->error[0] = '\0';
        r->skip[b] = q->given;
        if (q->given) continue;
        if (stk_dataset_span(r->ds, q->index, &r->span_off[b], &r->span_len[b]) != STK_OK) {
            fail_req(q, STK_ERR_INVALID_ARG, "%s", stk_last_error());
            r->skip[b] = true;
            continue;
        }
        /* The record's file, and its span there. */
        int k = stk_dataset_file_of(r->ds, r->span_off[b]);
        r->file[b] = k;
        r->span_off[b] -= stk_dataset_file_base(r->ds, k);
        /* O_DIRECT reads the aligned range around the record. */
        uint64_t a = r->direct ? r->span_off[b] / ALIGN * ALIGN : r->span_off[b];
        uint64_t end = r->span_off[b] + r->span_len[b];
        if (r->direct) end = (end + ALIGN - 1) / ALIGN * ALIGN;
        r->off[b] = a;
        r->len[b] = (size_t)(end - a);
    }
    if (r->io == STK_IO_URING)
        stk_uring_reader_submit(r->uring, base, r->file + base, r->off + base, r->len + base,
                                r->skip + base, n);
}

/* The mmap backend: copy out of LMDB's map. A file truncated since open would
 * raise SIGBUS on the pages past its end: check its size first. */
static void read_mapped(stk_record_reader *r, const stk_read_req *reqs, int base, int n)
{
    int sized = -1; /* the file whose size `size` is */
    uint64_t size = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        int b = base + i;
        if (r->skip[b]) continue;
        struct stat sb;
        if (r->file[b] != sized) {
            sized = r->file[b];
            size = fstat(r->fds[sized], &sb) == 0 ? (uint64_t)sb.st_size : UINT64_MAX;
        }
        if (r->span_off[b] + r->span_len[b] > size) { /* a short read */
            r->res[b] = size > r->span_off[b] ? (int64_t)(size - r->span_off[b]) : 0;
            continue;
        }
        const uint8_t *p;
        uint32_t len;
        stk_dataset_map_view(r->ds, reqs[i].index, &p, &len);
        memcpy(r->bufs[b], p, len);
        r->res[b] = len;
    }
}

void stk_record_reader_complete(stk_record_reader *r, int set, stk_read_req *reqs, int n,
                                uint64_t *bytes)
{
    if (n > r->depth) n = r->depth;
    int base = set ? r->depth : 0;
    if (r->io == STK_IO_URING) {
        stk_uring_reader_wait(r->uring, base, n, r->res + base);
    } else if (r->io == STK_IO_PREAD) {
        for (int i = 0; i < n; i++)
            if (!r->skip[base + i])
                r->res[base + i] = stk_pread_full(r->fds[r->file[base + i]], r->bufs[base + i],
                                                  r->len[base + i], r->off[base + i]);
    } else {
        read_mapped(r, reqs, base, n);
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        stk_read_req *q = &reqs[i];
        int b = base + i;
        if (q->status || q->given) continue;
        int64_t got = r->res[b];
        if (got < 0) {
            fail_req(q, STK_ERR_IO, "%s: read error at offset %" PRIu64 ": %s",
                     stk_dataset_file_path(r->ds, r->file[b]), r->off[b], strerror((int)-got));
            continue;
        }
        uint64_t need = r->span_off[b] + r->span_len[b] - r->off[b];
        if ((uint64_t)got < need) {
            fail_req(q, STK_ERR_CORRUPT,
                     "short read (%u bytes wanted at offset %" PRIu64 "): the file is truncated",
                     r->span_len[b], r->span_off[b]);
            continue;
        }
        total += (uint64_t)got;
        q->data = r->bufs[b] + (r->span_off[b] - r->off[b]);
        q->len = r->span_len[b];
    }
    if (bytes) *bytes += total;
}

void stk_record_reader_read(stk_record_reader *r, stk_read_req *reqs, int n, uint64_t *bytes)
{
    stk_record_reader_submit(r, 0, reqs, n);
    stk_record_reader_complete(r, 0, reqs, n, bytes);
}
