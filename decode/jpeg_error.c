#include "decode/jpeg_error.h"

#include <string.h>

#include <jerror.h>

static void on_error_exit(j_common_ptr cinfo)
{
    stk_jpeg_error *e = (stk_jpeg_error *)cinfo->err;
    if (e->status == STK_OK) {
        e->status = STK_ERR_CORRUPT;
        (*cinfo->err->format_message)(cinfo, e->message);
    }
    longjmp(e->jump, 1);
}

static void on_emit_message(j_common_ptr cinfo, int level)
{
    if (level >= 0) return; /* trace messages */
    /* A warning. An unknown JFIF minor revision is harmless; everything else
     * (premature end of data, corrupt entropy data, extraneous bytes, bad
     * progression) means the pixels would be wrong: treat it as an error. */
    if (cinfo->err->msg_code == JWRN_JFIF_MAJOR) return;
    on_error_exit(cinfo);
}

static void on_progress(j_common_ptr cinfo)
{
    if (!cinfo->is_decompressor) return;
    stk_jpeg_error *e = (stk_jpeg_error *)cinfo->err;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->input_scan_number > e->max_scans) {
        e->status = STK_ERR_LIMIT;
        snprintf(e->message, sizeof e->message, "progressive JPEG with more than %d scans refused",
                 e->max_scans);
        longjmp(e->jump, 1);
    }
}

struct jpeg_error_mgr *stk_jpeg_error_init(stk_jpeg_error *e, int max_scans)
{
    memset(e, 0, sizeof *e);
    jpeg_std_error(&e->pub);
    e->pub.error_exit = on_error_exit;
    e->pub.emit_message = on_emit_message;
    e->max_scans = max_scans;
    e->progress.progress_monitor = on_progress;
    return &e->pub;
}

void stk_jpeg_error_attach_progress(stk_jpeg_error *e, j_common_ptr cinfo)
{
    cinfo->progress = &e->progress;
}

stk_status stk_jpeg_error_status(const stk_jpeg_error *e)
{
    stk_status st = e->status ? e->status : STK_ERR_CORRUPT;
    if (st == STK_ERR_CORRUPT) return stk_error(st, "bad JPEG: %s", e->message);
    return stk_error(st, "%s", e->message);
}

int stk_jpeg_sniff_not_jpeg(const unsigned char *d, size_t len, char *what, size_t size)
{
    const char *kind = NULL;
    if (len == 0)
        kind = "empty file (0 bytes)";
    else if (len >= 2 && d[0] == 0xFF && d[1] == 0xD8)
        return 0;
    else if (len >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        kind = "a PNG image, not a JPEG";
    else if (len >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        kind = "a GIF image, not a JPEG";
    else if (len >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        kind = "a WebP image, not a JPEG";
    else if (len >= 2 && d[0] == 'B' && d[1] == 'M')
        kind = "a BMP image, not a JPEG";
    else if (len >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0))
        kind = "a TIFF image, not a JPEG";
    else
        kind = "not a JPEG (no start-of-image marker)";
    snprintf(what, size, "%s", kind);
    return 1;
}
