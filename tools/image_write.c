#include "tools/image_write.h"

#include "common/fs.h"
#include "decode/jpeg_error.h"
#include "runlog/png.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Both writers go through stk_file_write_atomic: on a full disk the previous
 * image stays whole instead of being replaced by a truncated one. */
static stk_status write_pnm(const char *path, const uint8_t *px, int w, int h, int c)
{
    char head[64];
    int hn = snprintf(head, sizeof head, "P%c\n%d %d\n255\n", c == 1 ? '5' : '6', w, h);
    stk_file_part parts[2] = {{head, (size_t)hn}, {px, (size_t)w * (size_t)h * (size_t)c}};
    return stk_file_write_atomic(path, parts, 2);
}

/* The encoder's output buffer lives on the heap so that it is known after a
 * longjmp from libjpeg's error handler. */
typedef struct jpeg_out {
    unsigned char *buf;
    unsigned long size;
} jpeg_out;

static stk_status write_jpeg(const char *path, const uint8_t *px, int w, int h, int c, int quality)
{
    struct jpeg_compress_struct cinfo;
    stk_jpeg_error err;
    jpeg_out *out = calloc(1, sizeof *out);
    if (!out) return stk_error(STK_ERR_NOMEM, "out of memory");
    cinfo.err = stk_jpeg_error_init(&err, 1);
    if (setjmp(err.jump)) {
        jpeg_destroy_compress(&cinfo);
        free(out->buf);
        free(out);
        return stk_error(STK_ERR_IO, "%s: %s", path, err.message);
    }
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, &out->buf, &out->size);
    cinfo.image_width = (JDIMENSION)w;
    cinfo.image_height = (JDIMENSION)h;
    cinfo.input_components = c;
    cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)cinfo.next_scanline * (size_t)w * (size_t)c);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    stk_file_part part = {out->buf, out->size};
    stk_status st = stk_file_write_atomic(path, &part, 1);
    free(out->buf);
    free(out);
    return st;
}

static stk_status write_png(const char *path, const uint8_t *px, int w, int h, int c)
{
    uint8_t *png;
    size_t n;
    STK_TRY(stk_png_encode(px, w, h, c, &png, &n));
    stk_file_part part = {png, n};
    stk_status st = stk_file_write_atomic(path, &part, 1);
    free(png);
    return st;
}

static bool ext_is(const char *path, const char *const *exts)
{
    const char *dot = strrchr(path, '.');
    for (; dot && *exts; exts++)
        if (!strcasecmp(dot, *exts)) return true;
    return false;
}

static const char *const pnm_exts[] = {".ppm", ".pgm", ".pnm", NULL};
static const char *const jpeg_exts[] = {".jpg", ".jpeg", NULL};
static const char *const png_exts[] = {".png", NULL};

bool stk_image_path_supported(const char *path)
{
    return ext_is(path, pnm_exts) || ext_is(path, jpeg_exts) || ext_is(path, png_exts);
}

stk_status stk_image_write(const char *path, const uint8_t *pixels, int width, int height,
                           int channels, int jpeg_quality)
{
    if (ext_is(path, pnm_exts)) return write_pnm(path, pixels, width, height, channels);
    if (ext_is(path, jpeg_exts))
        return write_jpeg(path, pixels, width, height, channels, jpeg_quality);
    if (ext_is(path, png_exts)) return write_png(path, pixels, width, height, channels);
    return stk_error(STK_ERR_INVALID_ARG, "%s: write .png or .ppm (lossless) or .jpg", path);
}
