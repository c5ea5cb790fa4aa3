/* Small file-system helpers shared by the modules: reading a whole file
 * safely, UTF-8 checks, printable names, directory fsync and locks.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Read the whole regular file at `path` into a new malloc'd buffer (*data,
 * *len; free() it). Refuses anything that is not a regular file (FIFO, device,
 * directory) without blocking on it, and files larger than `max_bytes`.
 * Errors: STK_ERR_IO (with errno text: ENOENT, EACCES, ELOOP, ...),
 * STK_ERR_UNSUPPORTED (not a regular file), STK_ERR_LIMIT, STK_ERR_NOMEM.
 * The message is the reason only; callers prefix the path. */
stk_status stk_file_read_all(const char *path, uint64_t max_bytes, uint8_t **data, size_t *len);

/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates). */
bool stk_utf8_valid(const char *s, size_t len);

/* Copy `name` into buf with bytes that are not printable UTF-8 written as
 * \xNN, so a message can always show the file it is about. Returns buf. */
const char *stk_printable(const char *name, char *buf, size_t size);

/* One piece of a file written by stk_file_write_atomic. */
typedef struct stk_file_part {
    const void *data;
    size_t len;
} stk_file_part;

/* Write the parts, in order, as the whole new content of `path`: into a
 * temporary in the same directory (PATH.tmp.XXXXXX), fsynced, renamed over
 * `path`, then the directory fsynced. After a full disk, an I/O error or a
 * crash, `path` is the old file or the new one, never a torn one; a failed
 * write removes its temporary (a killed writer may leave it). Mode 0644.
 * What `path` names is never replaced by a new file: a symbolic link is
 * followed and its target written (the link stays), a character device
 * (/dev/null) or FIFO is written straight through, and a directory, block
 * device or socket is refused (STK_ERR_UNSUPPORTED).
 * Errors: STK_ERR_IO ("PATH: write failed: No space left on device", "a FIFO
 * with no reader", ...), STK_ERR_UNSUPPORTED, STK_ERR_NOMEM. */
stk_status stk_file_write_atomic(const char *path, const stk_file_part *parts, int n);

/* Whether stk_file_write_atomic(path) could write there, checked before
 * the work that makes the content (an evaluation, an export): the folder
 * exists and is writable, and path is not a directory, block device or
 * socket. Errors: STK_ERR_IO ("x/y.csv: no folder x: No such file or
 * directory"), STK_ERR_UNSUPPORTED, STK_ERR_NOMEM. */
stk_status stk_output_path_check(const char *path);

/* fsync the directory holding `path`, so a rename into it is durable. */
stk_status stk_fsync_parent_dir(const char *path);

/* Take an exclusive lock (flock) on the directory `dir`, without waiting,
 * for as long as *fd (returned) stays open: close(*fd) releases it, and so
 * does the process's end, however it ends. Errors: STK_ERR_BUSY ("DIR is in
 * use by pid 1234 (stoke train --out DIR ...)": the holder named from
 * /proc/locks when it can be), STK_ERR_IO. The message is the reason only;
 * callers prefix the flag. */
stk_status stk_dir_lock(const char *dir, int *fd);

/* The same lock shared: any number of holders, refused (STK_ERR_BUSY) while
 * one holds it exclusively. A job's ranks share a folder this way, and an
 * exclusive stk_dir_lock then tells whether any of them is still alive;
 * flock(*fd, LOCK_SH) turns an exclusive lock into a shared one. */
stk_status stk_dir_lock_shared(const char *dir, int *fd);

/* Remove DIR/NAME.tmp.XXXXXX files (stk_file_write_atomic's temporaries,
 * left by a writer that was killed) for each of the n names; call it only
 * while holding DIR's lock. Returns how many were removed. */
int stk_remove_stale_temporaries(const char *dir, const char *const *names, int n);

/* mkdir -p: path and its parents (0755). 0, or -1 with errno. */
int stk_make_dirs(const char *path);

#ifdef __cplusplus
}
#endif
