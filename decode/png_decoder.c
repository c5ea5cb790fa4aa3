/* PNG decoding (png_decoder.h) through Debian's libpng: every colour type,
 * bit depth and interlace; samples reduced to u8 as PIL's convert("RGB")
 * and convert("L") do. */
#include "decode/png_decoder.h"

#include "decode/luma.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool stk_png_sniff(const uint8_t *data, size_t len)
{
    return len >= 8 && memcmp(data, signature, 8) == 0;
}

int stk_png_channels(const uint8_t *data, size_t len)
{
    /* IHDR follows the signature: length, "IHDR", width, height, depth, colour type */
    if (!stk_png_sniff(data, len) || len < 26) return 3;
    return data[25] == 0 || data[25] == 4 ? 1 : 3; /* grey, grey + alpha */
}

/* libpng's callbacks: the bytes from memory, errors into a message and a
 * longjmp back to stk_png_decode. */
typedef struct reader {
    const uint8_t *data;
    size_t len, at;
    char message[200];
    jmp_buf jump;
} reader;

static void read_bytes(png_structp png, png_bytep out, size_t n)
{
    reader *r = png_get_io_ptr(png);
    if (n > r->len - r->at) png_error(png, "truncated: the file ends inside the image");
    memcpy(out, r->data + r->at, n);
    r->at += n;
}

static void on_error(png_structp png, png_const_charp msg)
{
    reader *r = png_get_error_ptr(png);
    snprintf(r->message, sizeof r->message, "%s", msg);
    longjmp(r->jump, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* RGB rows -> L in place, as PIL's convert("L"). */
static void rgb_to_l(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++) px[i] = stk_image_luma(px + 3 * i);
}

stk_status stk_png_decode(const uint8_t *data, size_t len, int channels, uint64_t max_pixels,
                          uint8_t **pixels, uint32_t *width, uint32_t *height)
{
    *pixels = NULL;
    if (channels != 1 && channels != 3)
        return stk_error(STK_ERR_INVALID_ARG, "PNG: %d channels (1 or 3)", channels);
    if (!stk_png_sniff(data, len)) return stk_error(STK_ERR_CORRUPT, "not a PNG file");
    reader r = {.data = data, .len = len};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    /* volatile: read again after a longjmp */
    uint8_t *volatile out = NULL;
    png_bytep *volatile rows = NULL;
    volatile stk_status limit = STK_OK;
    if (setjmp(r.jump)) {
        png_destroy_read_struct(&png, &info, NULL);
        free(out);
        free(rows);
        if (limit != STK_OK) return limit;
        /* libpng's words, e.g. "IDAT: CRC error", "Not enough image data" */
        return stk_error(STK_ERR_CORRUPT, "PNG: %s", r.message);
    }
    png_set_read_fn(png, &r, read_bytes);
    png_read_info(png, info);
    uint32_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((uint64_t)w * h > (max_pixels ? max_pixels : 64000000)) {
        limit = stk_error(STK_ERR_LIMIT, "PNG: %ux%u pixels, above the limit", w, h);
        longjmp(r.jump, 1);
    }
    int color = png_get_color_type(png, info);
    /* To 8-bit grey or RGB: 16-bit samples keep their high byte (PIL's
     * "RGB;16B"), small greys are scaled up, palettes expanded, alpha
     * dropped without compositing (PIL's convert("RGB")). */
    png_set_strip_16(png);
    png_set_expand_gray_1_2_4_to_8(png);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    png_set_strip_alpha(png);
    bool grey = !(color & PNG_COLOR_MASK_COLOR);
    if (grey && channels == 3) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int got = png_get_channels(png, info); /* 1 or 3 now */
    out = malloc((size_t)w * h * 3);
    rows = malloc(h * sizeof *rows);
    if (!out || !rows) {
        limit = stk_error(STK_ERR_NOMEM, "out of memory");
        longjmp(r.jump, 1);
    }
    for (uint32_t y = 0; y < h; y++) rows[y] = out + (size_t)y * w * (size_t)got;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    if (got == 3 && channels == 1) rgb_to_l(out, (size_t)w * h);
    *pixels = out;
    *width = w;
    *height = h;
    return STK_OK;
}
