/* The image fixtures (tests/fixtures/make_fixtures.py, under $STOKE_FIXTURES)
 * for the decoder and augment tests: a path, a file's bytes, a PIL-written
 * PPM, PSNR, and a JPEG decoded whole as RGB. */
#pragma once

#include "common/fs.h"
#include "decode/jpeg_decoder.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* (a path by name: four at a time stay valid) */
static inline const char *fixture(const char *rel)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    const char *dir = getenv("STOKE_FIXTURES");
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir ? dir : "fixtures", rel);
    return buf[k];
}

static inline uint8_t *load(const char *rel, size_t *len)
{
    uint8_t *data;
    ck_assert_msg(stk_file_read_all(fixture(rel), 1 << 28, &data, len) == STK_OK, "%s: %s",
                  fixture(rel), stk_last_error());
    return data;
}

/* Read a binary PPM (P6) written by PIL. */
static inline uint8_t *read_ppm(const char *rel, int *w, int *h)
{
    FILE *f = fopen(fixture(rel), "rb");
    ck_assert_ptr_nonnull(f);
    int maxval;
    ck_assert_int_eq(fscanf(f, "P6 %d %d %d", w, h, &maxval), 3);
    fgetc(f);
    uint8_t *px = malloc((size_t)*w * (size_t)*h * 3);
    ck_assert_uint_eq(fread(px, 1, (size_t)*w * (size_t)*h * 3, f), (size_t)*w * (size_t)*h * 3);
    fclose(f);
    return px;
}

static inline double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) se += (double)(a[i] - b[i]) * (a[i] - b[i]);
    return se == 0 ? 99 : 10 * log10(255.0 * 255.0 / (se / (double)n));
}

/* A JPEG decoded whole (1/scale) as RGB (grey repeated), malloc'd. */
static inline uint8_t *decode_full_rgb(stk_jpeg_decoder *dec, const uint8_t *d, size_t len,
                                       int scale, uint32_t *w, uint32_t *h)
{
    const uint8_t *px;
    int c;
    ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, d, len, scale, &px, w, h, &c), STK_OK);
    uint8_t *rgb = malloc((size_t)*w * *h * 3);
    for (size_t i = 0; i < (size_t)*w * *h; i++)
        for (int k = 0; k < 3; k++) rgb[3 * i + k] = px[i * (size_t)c + (size_t)(c == 1 ? 0 : k)];
    return rgb;
}
