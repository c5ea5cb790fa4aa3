/* Reading records' bytes for the loader's workers, behind one interface:
 *
 *   uring  io_uring (liburing): every request of a call is in flight at
 *          once; the dataset file is registered, and so are the buffers
 *          when RLIMIT_MEMLOCK allows (else unregistered, with a notice)
 *   pread  one pread per record at the record index's (offset, length)
 * A dataset of several files (shards) is read through a descriptor of each.
 *   mmap   LMDB's map of the file: mdb_get-equivalent pointer + copy
 * `direct` reads with O_DIRECT the page-aligned range around each record
 * (uring and pread), so the page cache is bypassed.
 *
 *     stk_record_reader *r;
 *     stk_record_reader_create(ds, STK_IO_URING, false, 32, &r);
 *     stk_read_req req[32] = {{.index = 7}, ...};
 *     stk_record_reader_read(r, req, n);     // every req gets data/len or status
 *     stk_record_reader_destroy(r);
 *
 * If io_uring cannot be set up (ENOSYS: old kernel; EPERM: a seccomp profile
 * blocks it; ENOMEM: memlock limit) create() falls back to pread and logs
 * one line saying why. A short read (the file was truncated) is
 * STK_ERR_CORRUPT; a failed read is STK_ERR_IO with errno text and offset.
 * One reader per thread; `data` stays valid until the next read call.
 */
#pragma once

#include "common/status.h"
#include "storage/dataset.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_io_backend {
    STK_IO_URING = 0,
    STK_IO_PREAD = 1,
    STK_IO_MMAP = 2,
} stk_io_backend;

typedef struct stk_read_req {
    uint64_t index;      /* in: record index */
    bool given;          /* in: the bytes come from elsewhere (loader/block_store.h): not read */
    const uint8_t *data; /* out: the record's bytes (header, name, payload) */
    size_t len;
    stk_status status; /* out: STK_OK or the error (message in `error`) */
    char error[256];
} stk_read_req;

typedef struct stk_record_reader stk_record_reader;

/* depth: the most requests one read call takes. *used (may be NULL) gets
 * the backend actually in use after any fallback. */
stk_status stk_record_reader_create(const stk_dataset *ds, stk_io_backend io, bool direct,
                                    int depth, stk_record_reader **out, stk_io_backend *used);
void stk_record_reader_destroy(stk_record_reader *r);

/* Read n <= depth records. Bytes read are added to *bytes (may be NULL). */
void stk_record_reader_read(stk_record_reader *r, stk_read_req *reqs, int n, uint64_t *bytes);

/* The same in two steps, with two sets of buffers (set 0 or 1): submit()
 * starts the reads (io_uring; the other backends read in complete()),
 * complete() waits for them and fills reqs. A set's requests must not be
 * touched between the two calls; the other set can be used meanwhile. */
void stk_record_reader_submit(stk_record_reader *r, int set, stk_read_req *reqs, int n);
void stk_record_reader_complete(stk_record_reader *r, int set, stk_read_req *reqs, int n,
                                uint64_t *bytes);

const char *stk_io_backend_name(stk_io_backend io);
/* "uring" / "pread" / "mmap" -> backend; -1 if unknown. */
int stk_io_backend_parse(const char *name);

/* Private to loader/: the io_uring backend (reader_uring.c). */
typedef struct stk_uring_reader stk_uring_reader;
stk_status stk_uring_reader_create(const int *fds, int nfds, uint8_t *const *bufs, size_t buf_size,
                                   int nbufs, stk_uring_reader **out);
void stk_uring_reader_destroy(stk_uring_reader *u);
/* Start reads of (off[i], len[i]) of file fds[file[i]] into bufs[first + i], except where skip[i].
 */
void stk_uring_reader_submit(stk_uring_reader *u, int first, const int *file, const uint64_t *off,
                             const size_t *len, const bool *skip, int n);
/* Wait for the reads into bufs[first .. first + n); res[i] gets bytes read or -errno. */
void stk_uring_reader_wait(stk_uring_reader *u, int first, int n, int64_t *res);

#ifdef __cplusplus
}
#endif
