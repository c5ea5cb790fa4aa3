/* libjpeg error handling for Stoke (the one translation of libjpeg's errors).
 *
 * libjpeg reports a fatal error by calling error_exit, which by default
 * exits the process; warnings (truncated data, corrupt entropy data) are only
 * printed and the image decodes as grey garbage. Here both jump back to the
 * caller's setjmp with libjpeg's message: a damaged JPEG is an error, never
 * an exit and never silently wrong pixels. A progress monitor refuses
 * progressive files with more than `max_scans` scans (a known way to make a
 * tiny file cost minutes of CPU).
 *
 *     stk_jpeg_error err;
 *     struct jpeg_decompress_struct d;
 *     d.err = stk_jpeg_error_init(&err, 256);
 *     jpeg_create_decompress(&d);
 *     stk_jpeg_error_attach_progress(&err, (j_common_ptr)&d);
 *     if (setjmp(err.jump)) { st = stk_jpeg_error_status(&err); goto fail; }
 *     ... libjpeg calls ...
 */
#pragma once

#include "common/status.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <jpeglib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_jpeg_error {
    struct jpeg_error_mgr pub; /* first: libjpeg casts cinfo->err to this */
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX + 32];
    stk_status status; /* STK_ERR_CORRUPT unless a limit was hit */
    struct jpeg_progress_mgr progress;
    int max_scans;
} stk_jpeg_error;

/* Set up `e` and return the pointer to store in cinfo->err. */
struct jpeg_error_mgr *stk_jpeg_error_init(stk_jpeg_error *e, int max_scans);

/* Install the scan-limit progress monitor on a decompressor (after create). */
void stk_jpeg_error_attach_progress(stk_jpeg_error *e, j_common_ptr cinfo);

/* After the jump: the status, with the message set for stk_last_error(). */
stk_status stk_jpeg_error_status(const stk_jpeg_error *e);

/* When `data` is not a JPEG, describe what it is ("a PNG image", "empty
 * file", ...) and return non-zero; return 0 when it starts like a JPEG. */
int stk_jpeg_sniff_not_jpeg(const unsigned char *data, size_t len, char *what, size_t size);

#ifdef __cplusplus
}
#endif
