#include "runlog/png.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A chunk: length, type, data, CRC-32 of type and data. Returns the new end. */
static uint8_t *chunk(uint8_t *p, const char type[4], const uint8_t *data, uint32_t len)
{
    be32(p, len);
    memcpy(p + 4, type, 4);
    if (len) memcpy(p + 8, data, len);
    uLong crc = crc32(0L, p + 4, len + 4);
    be32(p + 8 + len, (uint32_t)crc);
    return p + 12 + len;
}

stk_status stk_png_encode(const uint8_t *pixels, int width, int height, int channels, uint8_t **out,
                          size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    static const uint8_t color_type[5] = {0, 0, 0, 2, 6}; /* by channels: gray, RGB, RGBA */
    if (width < 1 || height < 1 || width > (1 << 24) || height > (1 << 24) ||
        (channels != 1 && channels != 3 && channels != 4))
        return stk_error(STK_ERR_INVALID_ARG, "png: cannot encode %dx%d with %d channels", width,
                         height, channels);
    size_t row = (size_t)width * (size_t)channels;
    size_t raw_len = (row + 1) * (size_t)height; /* each row: filter byte 0 (none), pixels */
    uint8_t *raw = malloc(raw_len);
    uLongf z_len = compressBound((uLong)raw_len);
    uint8_t *z = malloc(z_len);
    uint8_t *png = malloc(8 + 25 + 12 + z_len + 12);
    stk_status st = STK_OK;
    if (!raw || !z || !png) {
        st = stk_error(STK_ERR_NOMEM, "png: no memory for a %dx%d image", width, height);
        goto out;
    }
    for (int y = 0; y < height; y++) {
        raw[(size_t)y * (row + 1)] = 0;
        memcpy(raw + (size_t)y * (row + 1) + 1, pixels + (size_t)y * row, row);
    }
    if (compress2(z, &z_len, raw, (uLong)raw_len, 6) != Z_OK) {
        st = stk_error(STK_ERR_NOMEM, "png: zlib failed to compress a %dx%d image", width, height);
        goto out;
    }
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13];
    be32(ihdr, (uint32_t)width);
    be32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 8; /* bits per sample */
    ihdr[9] = color_type[channels];
    ihdr[10] = ihdr[11] = ihdr[12] = 0; /* deflate, adaptive filters, no interlace */
    memcpy(png, signature, 8);
    uint8_t *p = chunk(png + 8, "IHDR", ihdr, 13);
    p = chunk(p, "IDAT", z, (uint32_t)z_len);
    p = chunk(p, "IEND", NULL, 0);
    *out_len = (size_t)(p - png);
    *out = png;
    png = NULL;
out:
    free(raw);
    free(z);
    free(png);
    return st;
}
