/* augment/: JPEG error handling, decoder, pack-time preparation, resize. */
#include "augment/augment.h"
#include "augment/png_decoder.h"
#include "augment/image_decode.h"
#include "augment/geometry.h"
#include "augment/jpeg_decoder.h"
#include "augment/jpeg_huffman.h"
#include "augment/jpeg_prepare.h"
#include "augment/jpeg_entropy.h"
#include "augment/jpeg_segments.h"
#include "augment/resize.h"
#include "augment/transform_spec.h"
#include "common/fs.h"
#include "common/half.h"
#include "common/rng.h"

#include "tests/check_main.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <jpeglib.h>

static const char *fixture(const char *rel)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    const char *dir = getenv("STOKE_FIXTURES");
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir ? dir : "fixtures", rel);
    return buf[k];
}

static uint8_t *load(const char *rel, size_t *len)
{
    uint8_t *data;
    ck_assert_msg(stk_file_read_all(fixture(rel), 1 << 28, &data, len) == STK_OK, "%s: %s",
                  fixture(rel), stk_last_error());
    return data;
}

static stk_jpeg_decoder *dec;

static void setup(void) { ck_assert_int_eq(stk_jpeg_decoder_create(64000000, &dec), STK_OK); }
static void teardown(void) { stk_jpeg_decoder_destroy(dec); }

START_TEST(header_kinds)
{
    static const struct {
        const char *file;
        stk_jpeg_kind kind;
        int comps;
        bool progressive;
    } cases[] = {
        {"single/baseline.jpg", STK_JPEG_YCBCR, 3, false},
        {"single/gray.jpg", STK_JPEG_GRAY, 1, false},
        {"single/progressive.jpg", STK_JPEG_YCBCR, 3, true},
        {"single/cmyk.jpg", STK_JPEG_CMYK, 4, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        uint8_t *d = load(cases[i].file, &len);
        stk_jpeg_info info;
        ck_assert_int_eq(stk_jpeg_decoder_header(dec, d, len, &info), STK_OK);
        ck_assert_int_eq(info.kind, cases[i].kind);
        ck_assert_int_eq(info.components, cases[i].comps);
        ck_assert_int_eq(info.progressive, cases[i].progressive);
        free(d);
    }
}
END_TEST

START_TEST(bad_inputs_are_errors_with_reasons)
{
    static const struct {
        const char *file;
        stk_status st;
        const char *reason;
    } cases[] = {
        {"bad/zero.jpg", STK_ERR_UNSUPPORTED, "empty file"},
        {"bad/text.jpg", STK_ERR_UNSUPPORTED, "not a JPEG"},
        {"formats/png_named.jpg", STK_ERR_UNSUPPORTED, "a PNG image"},
        {"bad/anim.gif", STK_ERR_UNSUPPORTED, "a GIF image"},
        {"bad/fake.webp", STK_ERR_UNSUPPORTED, "a WebP image"},
        {"bad/truncated.jpg", STK_ERR_CORRUPT, "Premature end"},
        {"bad/corrupt.jpg", STK_ERR_CORRUPT, "bad JPEG"},
        {"bad/soi_garbage.jpg", STK_ERR_CORRUPT, "bad JPEG"},
        {"bad/bomb.jpg", STK_ERR_LIMIT, "65500x65500"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        uint8_t *d = load(cases[i].file, &len);
        stk_jpeg_info info;
        stk_status st = stk_jpeg_decoder_validate(dec, d, len, &info, NULL);
        ck_assert_msg(st == cases[i].st, "%s: status %d (%s)", cases[i].file, st, stk_last_error());
        ck_assert_msg(strstr(stk_last_error(), cases[i].reason), "%s: %s", cases[i].file,
                      stk_last_error());
        free(d);
    }
    /* The decoder is still good after all those errors. */
    size_t len;
    uint8_t *d = load("single/baseline.jpg", &len);
    stk_jpeg_info info;
    ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, NULL), STK_OK);
    free(d);
}
END_TEST

START_TEST(validate_gives_exact_stats)
{
    size_t len;
    uint8_t *d = load("single/gray128.jpg", &len);
    stk_jpeg_info info;
    stk_pixel_stats s = {0};
    ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, &s), STK_OK);
    ck_assert_uint_eq(s.pixels, 256);
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_eq(s.sum[c], 128 * 256);
        ck_assert_uint_eq(s.sumsq[c], 128 * 128 * 256);
    }
    free(d);
}
END_TEST

START_TEST(validate_stats_match_decoded_pixels)
{
    /* Rows of 192, 40 and 13000 bytes: 48-byte SIMD blocks, the scalar tail,
     * and more than 256 blocks in a row. */
    static const char *files[] = {"single/baseline.jpg", "single/gray.jpg", "single/wide_gray.jpg"};
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *d = load(files[f], &len);
        stk_jpeg_info info;
        stk_pixel_stats s = {0};
        ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, &s), STK_OK);
        const uint8_t *px;
        uint32_t w, h;
        int c;
        ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, d, len, 8, &px, &w, &h, &c), STK_OK);
        uint64_t sum[3] = {0}, sq[3] = {0};
        for (size_t i = 0; i < (size_t)w * h * (size_t)c; i++) {
            sum[i % (size_t)c] += px[i];
            sq[i % (size_t)c] += (uint64_t)px[i] * px[i];
        }
        ck_assert_uint_eq(s.pixels, (uint64_t)w * h);
        for (int k = 0; k < 3; k++) {
            ck_assert_uint_eq(s.sum[k], sum[c == 1 ? 0 : k]);
            ck_assert_uint_eq(s.sumsq[k], sq[c == 1 ? 0 : k]);
        }
        free(d);
    }
}
END_TEST

static stk_jpeg_preparer *preparer(uint32_t max_side, bool validate)
{
    stk_jpeg_prepare_options o = {
        .max_pixels = 64000000, .max_side = max_side, .quality = 90, .validate = validate};
    stk_jpeg_preparer *p;
    ck_assert_int_eq(stk_jpeg_preparer_create(&o, &p), STK_OK);
    return p;
}

START_TEST(prepare_stores_baseline_as_is)
{
    stk_jpeg_preparer *p = preparer(0, true);
    size_t len;
    uint8_t *d = load("single/baseline.jpg", &len);
    stk_jpeg_prepared r;
    ck_assert_int_eq(stk_jpeg_prepare(p, d, len, &r), STK_OK);
    ck_assert_int_eq(r.action, STK_JPEG_STORED);
    ck_assert_ptr_eq(r.data, d);
    ck_assert_uint_eq(r.width, 64);
    ck_assert_uint_eq(r.height, 48);
    ck_assert_int_eq(r.channels, 3);
    ck_assert(r.has_stats);
    stk_jpeg_prepared_free(&r, d);
    free(d);
    d = load("single/gray.jpg", &len);
    ck_assert_int_eq(stk_jpeg_prepare(p, d, len, &r), STK_OK);
    ck_assert_int_eq(r.channels, 1);
    stk_jpeg_prepared_free(&r, d);
    free(d);
    stk_jpeg_preparer_destroy(p);
}
END_TEST

START_TEST(prepare_transcodes_progressive_losslessly)
{
    stk_jpeg_preparer *p = preparer(0, true);
    size_t len;
    uint8_t *d = load("single/progressive.jpg", &len);
    stk_jpeg_prepared r;
    ck_assert_int_eq(stk_jpeg_prepare(p, d, len, &r), STK_OK);
    ck_assert_int_eq(r.action, STK_JPEG_TRANSCODED);
    ck_assert_ptr_ne(r.data, d);
    stk_jpeg_info info;
    ck_assert_int_eq(stk_jpeg_decoder_header(dec, r.data, r.len, &info), STK_OK);
    ck_assert(!info.progressive && !info.arithmetic);
    /* Same coefficients, so the same pixels. */
    const uint8_t *px;
    uint32_t w, h;
    int c;
    ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, d, len, 8, &px, &w, &h, &c), STK_OK);
    uint8_t *orig = malloc((size_t)w * h * (size_t)c);
    memcpy(orig, px, (size_t)w * h * (size_t)c);
    ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, r.data, r.len, 8, &px, &w, &h, &c), STK_OK);
    ck_assert(memcmp(orig, px, (size_t)w * h * (size_t)c) == 0);
    free(orig);
    stk_jpeg_prepared_free(&r, d);
    free(d);
    stk_jpeg_preparer_destroy(p);
}
END_TEST

/* Read a binary PPM (P6) written by PIL. */
static uint8_t *read_ppm(const char *rel, int *w, int *h)
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

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) se += (double)(a[i] - b[i]) * (a[i] - b[i]);
    return se == 0 ? 99 : 10 * log10(255.0 * 255.0 / (se / (double)n));
}

START_TEST(prepare_converts_cmyk_like_pil)
{
    stk_jpeg_preparer *p = preparer(0, true);
    size_t len;
    uint8_t *d = load("single/cmyk.jpg", &len);
    stk_jpeg_prepared r;
    ck_assert_int_eq(stk_jpeg_prepare(p, d, len, &r), STK_OK);
    ck_assert_int_eq(r.action, STK_JPEG_CONVERTED);
    ck_assert_int_eq(r.channels, 3);
    int w, h;
    uint8_t *expect = read_ppm("single/cmyk_expected.ppm", &w, &h);
    const uint8_t *px;
    uint32_t pw, ph;
    int c;
    ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, r.data, r.len, 8, &px, &pw, &ph, &c), STK_OK);
    ck_assert_uint_eq(pw, (uint32_t)w);
    ck_assert_int_eq(c, 3);
    /* Re-encoded at quality 90 with 4:2:0 chroma: near PIL's conversion. (The
     * fixture's per-channel noise is harsh on chroma subsampling.) */
    double q = psnr(px, expect, (size_t)w * (size_t)h * 3);
    ck_assert_msg(q > 25, "PSNR %.1f dB", q);
    /* Our CMYK -> RGB conversion itself matches PIL's to rounding. */
    ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, d, len, 8, &px, &pw, &ph, &c), STK_OK);
    int worst = 0;
    for (size_t i = 0; i < (size_t)w * (size_t)h * 3; i++) {
        int diff = abs((int)px[i] - (int)expect[i]);
        if (diff > worst) worst = diff;
    }
    ck_assert_msg(worst <= 1, "largest difference from PIL: %d", worst);
    free(expect);
    stk_jpeg_prepared_free(&r, d);
    free(d);
    stk_jpeg_preparer_destroy(p);
}
END_TEST

START_TEST(prepare_max_side_resizes)
{
    stk_jpeg_preparer *p = preparer(256, false);
    size_t len;
    uint8_t *d = load("single/large.jpg", &len);
    stk_jpeg_prepared r;
    ck_assert_int_eq(stk_jpeg_prepare(p, d, len, &r), STK_OK);
    ck_assert_int_eq(r.action, STK_JPEG_RESIZED);
    ck_assert_uint_eq(r.width, 256);
    ck_assert_uint_eq(r.height, 192);
    ck_assert(!r.has_stats);
    ck_assert_uint_lt(r.len, len);
    stk_jpeg_prepared_free(&r, d);
    free(d);
    /* Images already small enough are stored as they are. */
    d = load("single/baseline.jpg", &len);
    ck_assert_int_eq(stk_jpeg_prepare(p, d, len, &r), STK_OK);
    ck_assert_int_eq(r.action, STK_JPEG_STORED);
    free(d);
    stk_jpeg_preparer_destroy(p);
    stk_jpeg_prepare_options bad = {.max_pixels = 1, .quality = 0};
    ck_assert_int_eq(stk_jpeg_preparer_create(&bad, &p), STK_ERR_INVALID_ARG);
}
END_TEST

START_TEST(resize_constant_and_antialias)
{
    uint8_t src[8 * 6 * 3], dst[4 * 3 * 3];
    memset(src, 77, sizeof src);
    ck_assert_int_eq(stk_resize_u8(src, 8, 6, 3, dst, 4, 3), STK_OK);
    for (size_t i = 0; i < sizeof dst; i++) ck_assert_uint_eq(dst[i], 77);
    /* 1-pixel stripes shrunk 4x average out instead of aliasing to 0 or 255. */
    uint8_t stripes[16 * 4], small[4 * 1];
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 16; x++) stripes[y * 16 + x] = x % 2 ? 255 : 0;
    ck_assert_int_eq(stk_resize_u8(stripes, 16, 4, 1, small, 4, 1), STK_OK);
    for (int x = 0; x < 4; x++) ck_assert_msg(small[x] > 100 && small[x] < 155, "%d", small[x]);
    /* upscale 1x1 */
    uint8_t one[1] = {200}, big[9];
    ck_assert_int_eq(stk_resize_u8(one, 1, 1, 1, big, 3, 3), STK_OK);
    for (int i = 0; i < 9; i++) ck_assert_uint_eq(big[i], 200);
    ck_assert_int_eq(stk_resize_u8(one, 0, 1, 1, big, 3, 3), STK_ERR_INVALID_ARG);
}
END_TEST

/* One output of a window resize in double precision: the triangle taps of
 * each axis as PIL computes them (centre in0 + (i + 0.5) * scale, support
 * scale when shrinking, reads clamped to the bounds), written independently
 * of augment/resize.c. */
static double window_reference(const uint8_t *px, int w, int c, const stk_window *win, int ow,
                               int oh, bool flip, int x, int y, int ch)
{
    double acc = 0, wsum_y = 0;
    int ix = flip ? ow - 1 - x : x;
    double sx = win->w / ow, sy = win->h / oh, fx = sx > 1 ? sx : 1, fy = sy > 1 ? sy : 1;
    double cx = win->x0 + (ix + 0.5) * sx, cy = win->y0 + (y + 0.5) * sy;
    int x_lo = (int)(cx - fx + 0.5), x_hi = (int)(cx + fx + 0.5);
    int y_lo = (int)(cy - fy + 0.5), y_hi = (int)(cy + fy + 0.5);
    x_lo = x_lo < win->bx0 ? win->bx0 : x_lo, x_hi = x_hi > win->bx1 ? win->bx1 : x_hi;
    y_lo = y_lo < win->by0 ? win->by0 : y_lo, y_hi = y_hi > win->by1 ? win->by1 : y_hi;
    for (int yy = y_lo; yy < y_hi; yy++) {
        double ty = 1 - fabs((yy - cy + 0.5) / fy), row = 0, wsum_x = 0;
        if (ty <= 0) continue;
        for (int xx = x_lo; xx < x_hi; xx++) {
            double tx = 1 - fabs((xx - cx + 0.5) / fx);
            if (tx <= 0) continue;
            row += tx * px[((size_t)yy * w + xx) * c + ch];
            wsum_x += tx;
        }
        acc += ty * row / wsum_x;
        wsum_y += ty;
    }
    return acc / wsum_y;
}

/* The SIMD passes (a 4-tap kernel for shrinks below 2x, the general one,
 * outputs stored 4, 2 and 1 at a time) against the double reference, for
 * every output width 1..41 and shrink factors 0.6-3.4, both pass orders,
 * flipped or not; nothing is written past a row (a canary after each row,
 * the last row ending at the end of its allocation for ASan). */
START_TEST(resize_window_matches_a_double_reference)
{
    enum { W = 160, H = 48, C = 3 };
    uint8_t *px = malloc(W * H * C);
    stk_rng r;
    stk_rng_init(&r, 7, 0, 0);
    for (int i = 0; i < W * H * C; i++) px[i] = (uint8_t)stk_rng_u32(&r);
    stk_view src = {px, W * C, W, H, C};
    stk_resizer *rz;
    ck_assert_int_eq(stk_resizer_create(&rz), STK_OK);
    const double shrink[] = {0.6, 1.0, 1.3, 1.9, 2.0, 2.6, 3.4};
    const int heights[][2] = {{5, 20}, {7, 3}}; /* out_h, window h: vertical first, then not */
    int checked = 0;
    for (int ow = 1; ow <= 41; ow++)
        for (size_t k = 0; k < sizeof shrink / sizeof *shrink; k++)
            for (int hv = 0; hv < 2; hv++)
                for (int flip = 0; flip < 2; flip++) {
                    int oh = heights[hv][0];
                    double ww = ow * shrink[k];
                    if (ww > W - 4) continue;
                    stk_window win = {1.25 + 0.5 * (ow % 3), 2.5, ww, heights[hv][1], 0, 0, W, H};
                    size_t row = (size_t)ow * C, stride = row + 16;
                    size_t bytes = stride * (size_t)(oh - 1) + row;
                    uint8_t *dst = malloc(bytes);
                    memset(dst, 0xAB, bytes);
                    ck_assert_int_eq(
                        stk_resize_u8_window(rz, &src, &win, dst, stride, ow, oh, flip), STK_OK);
                    for (int y = 0; y < oh; y++) {
                        for (int x = 0; x < ow; x++)
                            for (int ch = 0; ch < C; ch++) {
                                double ref =
                                    window_reference(px, W, C, &win, ow, oh, flip, x, y, ch);
                                uint8_t got = dst[(size_t)y * stride + (size_t)x * C + (size_t)ch];
                                ck_assert_msg(fabs(got - ref) <= 1.6,
                                              "out %dx%d shrink %.1f flip %d: (%d,%d,%d) = %u, "
                                              "reference %.2f",
                                              ow, oh, shrink[k], flip, x, y, ch, got, ref);
                            }
                        for (size_t b = row; y + 1 < oh && b < stride; b++)
                            ck_assert_msg(dst[(size_t)y * stride + b] == 0xAB,
                                          "out %dx%d shrink %.1f: byte %zu after row %d written",
                                          ow, oh, shrink[k], b - row, y);
                    }
                    free(dst);
                    checked++;
                }
    ck_assert_int_gt(checked, 900);
    stk_resizer_destroy(rz);
    free(px);
}
END_TEST

/* ---- region-of-interest decode ---- */

/* Full decode at DCT scale `scale`, as RGB (gray expanded), into a new buffer. */
static uint8_t *decode_full_rgb(const uint8_t *d, size_t len, int scale, uint32_t *w, uint32_t *h)
{
    const uint8_t *px;
    int c;
    ck_assert_int_eq(stk_jpeg_decoder_pixels(dec, d, len, scale, &px, w, h, &c), STK_OK);
    uint8_t *rgb = malloc((size_t)*w * *h * 3);
    for (size_t i = 0; i < (size_t)*w * *h; i++)
        for (int k = 0; k < 3; k++) rgb[3 * i + k] = px[i * (size_t)c + (size_t)(c == 1 ? 0 : k)];
    return rgb;
}

START_TEST(roi_decode_matches_full_decode)
{
    static const char *files[] = {
        "single/baseline.jpg", "single/gray.jpg",   "single/progressive.jpg", "single/cmyk.jpg",
        "single/sub444.jpg",   "single/sub422.jpg", "single/sub420.jpg",      "single/odd_17x9.jpg",
        "single/restart.jpg",  "single/large.jpg",  "single/wide_2000x2.jpg", "single/one_1x1.jpg"};
    stk_rng r;
    stk_rng_init(&r, 7, 0, 0);
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t len;
        uint8_t *d = load(files[f], &len);
        stk_jpeg_info info;
        ck_assert_int_eq(stk_jpeg_decoder_header(dec, d, len, &info), STK_OK);
        for (int trial = 0; trial < 12; trial++) {
            int bx0 = (int)stk_rng_below(&r, info.width), by0 = (int)stk_rng_below(&r, info.height);
            int bx1 = bx0 + 1 + (int)stk_rng_below(&r, info.width - (uint32_t)bx0);
            int by1 = by0 + 1 + (int)stk_rng_below(&r, info.height - (uint32_t)by0);
            int out = 1 + (int)stk_rng_below(&r, 64);
            stk_jpeg_region reg;
            stk_status st =
                stk_jpeg_decoder_region(dec, d, len, bx0, by0, bx1, by1, bx1 - bx0, by1 - by0, out,
                                        out, 3, info.width, info.height, &reg);
            ck_assert_msg(st == STK_OK, "%s: %s", files[f], stk_last_error());
            ck_assert_int_eq(reg.channels, 3);
            /* The scale is the smallest SIMD one that still spans the output. */
            ck_assert(reg.scale == 8 || (bx1 - bx0) * reg.scale / 8.0 >= out);
            ck_assert(reg.scale == 1 || (bx1 - bx0) * reg.scale / 16.0 < out ||
                      (by1 - by0) * reg.scale / 16.0 < out);
            /* reg.pixels live in the decoder's scratch: keep them before decoding again. */
            uint8_t *region = malloc(reg.stride * (size_t)reg.height);
            memcpy(region, reg.pixels, reg.stride * (size_t)reg.height);
            uint32_t fw, fh;
            uint8_t *full = decode_full_rgb(d, len, reg.scale, &fw, &fh);
            /* The region covers the scaled bounds and equals the full decode there. */
            ck_assert_int_le(reg.origin_x, (int)floor(bx0 * reg.scale / 8.0));
            ck_assert_int_ge(reg.origin_x + reg.width, (int)fmin(ceil(bx1 * reg.scale / 8.0), fw));
            /* Exact inside the scaled bounds that were asked for. */
            int ax0 = (int)floor(bx0 * reg.scale / 8.0) - reg.origin_x;
            int ax1 = (int)fmin(ceil(bx1 * reg.scale / 8.0), fw) - reg.origin_x;
            ck_assert(ax0 >= 0 && ax1 <= reg.width);
            for (int y = 0; y < reg.height; y++)
                ck_assert_msg(
                    memcmp(region + (size_t)y * reg.stride + (size_t)ax0 * 3,
                           full +
                               ((size_t)(reg.origin_y + y) * fw + (size_t)(reg.origin_x + ax0)) * 3,
                           (size_t)(ax1 - ax0) * 3) == 0,
                    "%s: row %d of region [%d,%d)x[%d,%d) at scale %d differs from the full decode",
                    files[f], y, bx0, bx1, by0, by1, reg.scale);
            free(region);
            free(full);
        }
        free(d);
    }
}
END_TEST

/* ---- restart-marker segments (jpeg_segments.h) ---- */

static const char *seg_files[] = {
    "single/baseline.jpg", "single/gray.jpg",        "single/progressive.jpg", "single/sub444.jpg",
    "single/sub422.jpg",   "single/sub420.jpg",      "single/odd_17x9.jpg",    "single/restart.jpg",
    "single/large.jpg",    "single/wide_2000x2.jpg", "single/one_1x1.jpg",     "single/cmyk.jpg"};

/* The file prepared for a pack with restart markers about every `target`
 * MCUs (0: none), its Huffman statistics counted by jpeg_huffman.c or (not
 * `counted`) by libjpeg. */
static uint8_t *prepared(const char *rel, int target, bool counted, size_t *len,
                         stk_jpeg_action *action)
{
    stk_jpeg_prepare_options o = {
        .max_pixels = 64000000, .quality = 90, .validate = true, .restart_mcus = target};
    stk_jpeg_preparer *p;
    ck_assert_int_eq(stk_jpeg_preparer_create(&o, &p), STK_OK);
    stk_jpeg_preparer_set_counted_tables(p, counted);
    size_t n;
    uint8_t *d = load(rel, &n);
    stk_jpeg_prepared r;
    ck_assert_msg(stk_jpeg_prepare(p, d, n, &r) == STK_OK, "%s: %s", rel, stk_last_error());
    uint8_t *out = malloc(r.len);
    memcpy(out, r.data, r.len);
    *len = r.len;
    if (action) *action = r.action;
    stk_jpeg_prepared_free(&r, d);
    free(d);
    stk_jpeg_preparer_destroy(p);
    return out;
}

static uint8_t *segmented(const char *rel, int target, size_t *len, stk_jpeg_action *action)
{
    return prepared(rel, target, true, len, action);
}

/* segmented(), its segment grid (parsed) and its header (read by dec). */
static uint8_t *segmented_grid(const char *rel, int target, size_t *len, stk_jpeg_segments *s,
                               stk_jpeg_info *info)
{
    uint8_t *d = segmented(rel, target, len, NULL);
    ck_assert_int_eq(stk_jpeg_segments_parse(d, *len, s), STK_OK);
    ck_assert_int_eq(stk_jpeg_decoder_header(dec, d, *len, info), STK_OK);
    return d;
}

typedef struct coefs {
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr e;
    jvirt_barray_ptr *arrays;
} coefs;

static void read_coefs(coefs *c, const uint8_t *data, size_t len)
{
    c->d.err = jpeg_std_error(&c->e);
    jpeg_create_decompress(&c->d);
    jpeg_mem_src(&c->d, data, (unsigned long)len);
    jpeg_read_header(&c->d, TRUE);
    c->arrays = jpeg_read_coefficients(&c->d);
}

/* The quantised DCT coefficients (and quantisation tables) of a and b are
 * the same: the rewrite is lossless, whatever its Huffman tables and markers. */
static bool same_coefficients(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    coefs x, y;
    read_coefs(&x, a, alen);
    read_coefs(&y, b, blen);
    bool same = x.d.num_components == y.d.num_components && x.d.image_width == y.d.image_width &&
                x.d.image_height == y.d.image_height;
    for (int ci = 0; same && ci < x.d.num_components; ci++) {
        jpeg_component_info *cx = &x.d.comp_info[ci], *cy = &y.d.comp_info[ci];
        same = cx->h_samp_factor == cy->h_samp_factor && cx->v_samp_factor == cy->v_samp_factor &&
               !memcmp(cx->quant_table->quantval, cy->quant_table->quantval,
                       sizeof cx->quant_table->quantval);
        for (JDIMENSION row = 0; same && row < cx->height_in_blocks; row++) {
            JBLOCKARRAY bx =
                x.d.mem->access_virt_barray((j_common_ptr)&x.d, x.arrays[ci], row, 1, FALSE);
            JBLOCKARRAY by =
                y.d.mem->access_virt_barray((j_common_ptr)&y.d, y.arrays[ci], row, 1, FALSE);
            same = !memcmp(bx[0], by[0], cx->width_in_blocks * sizeof(JBLOCK));
        }
    }
    jpeg_destroy_decompress(&x.d);
    jpeg_destroy_decompress(&y.d);
    return same;
}

START_TEST(restart_interval_divides_the_row)
{
    ck_assert_int_eq(stk_jpeg_restart_interval(40, 4), 4);
    ck_assert_int_eq(stk_jpeg_restart_interval(30, 4), 3);
    ck_assert_int_eq(stk_jpeg_restart_interval(37, 4), 1); /* prime */
    ck_assert_int_eq(stk_jpeg_restart_interval(2, 4), 2);
    ck_assert_int_eq(stk_jpeg_restart_interval(1, 4), 1);
    ck_assert_int_eq(stk_jpeg_restart_interval(128, 64), 64);
}
END_TEST

START_TEST(segmented_files_keep_their_coefficients)
{
    for (size_t f = 0; f < sizeof seg_files / sizeof *seg_files; f++)
        for (int target = 1; target <= 8; target *= 2) {
            size_t len, olen;
            stk_jpeg_action action;
            uint8_t *d = segmented(seg_files[f], target, &len, &action);
            uint8_t *orig = load(seg_files[f], &olen);
            stk_jpeg_segments s = {0};
            ck_assert_msg(stk_jpeg_segments_parse(d, len, &s) == STK_OK, "%s: %s", seg_files[f],
                          stk_last_error());
            ck_assert_int_le(s.interval, target);
            ck_assert_int_eq(s.mcus_x % s.interval, 0);
            ck_assert_uint_eq(s.count, (size_t)s.per_row * (size_t)s.mcus_y);
            if (!strstr(seg_files[f], "cmyk")) { /* CMYK is converted: new coefficients */
                ck_assert_msg(same_coefficients(orig, olen, d, len), "%s: coefficients differ",
                              seg_files[f]);
                /* a file with a fine enough grid already (restart.jpg: 6 MCUs) stays as it is */
                ck_assert(action == (strstr(seg_files[f], "progressive") ? STK_JPEG_TRANSCODED
                                                                         : STK_JPEG_SEGMENTED) ||
                          (action == STK_JPEG_STORED && len == olen && !memcmp(d, orig, len)));
            }
            stk_jpeg_segments_free(&s);
            free(orig);
            free(d);
        }
}
END_TEST

/* The Huffman tables counted from the coefficients (jpeg_huffman.c) are
 * libjpeg's optimize_coding tables: every transcode (progressive to
 * baseline, restart markers at each interval) writes the same bytes. */
START_TEST(counted_tables_write_libjpegs_bytes)
{
    int transcodes = 0;
    for (size_t f = 0; f < sizeof seg_files / sizeof *seg_files; f++)
        for (int target = 0; target <= 8; target = target ? target * 2 : 1) {
            size_t a_len, b_len;
            stk_jpeg_action action;
            uint8_t *a = prepared(seg_files[f], target, true, &a_len, &action);
            uint8_t *b = prepared(seg_files[f], target, false, &b_len, NULL);
            ck_assert_msg(a_len == b_len && !memcmp(a, b, a_len),
                          "%s, restart %d: %zu bytes with counted tables, %zu with libjpeg's",
                          seg_files[f], target, a_len, b_len);
            transcodes += action == STK_JPEG_SEGMENTED || action == STK_JPEG_TRANSCODED;
            free(a);
            free(b);
        }
    ck_assert_int_ge(transcodes, 30);
}
END_TEST

/* libjpeg's own table maker (exported by libjpeg-turbo, declared in its
 * private jchuff.h), the reference for stk_huff_optimal_table. */
void jpeg_gen_optimal_table(j_compress_ptr cinfo, JHUFF_TBL *htbl, long freq[]);

START_TEST(optimal_tables_equal_libjpegs)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    JHUFF_TBL *ref = jpeg_alloc_huff_table((j_common_ptr)&c);
    stk_rng r;
    stk_rng_init(&r, 5, 0, 0);
    for (int trial = 0; trial < 300; trial++) {
        int64_t counts[256] = {0};
        long freq[257] = {0};
        int used = 1 + (int)stk_rng_below(&r, trial % 3 ? 256 : 12);
        for (int k = 0; k < used; k++) {
            int sym = (int)stk_rng_below(&r, 256);
            /* geometric spreads make codes longer than 16 bits to fold */
            counts[sym] +=
                trial % 4 == 0 ? (int64_t)1 << stk_rng_below(&r, 24) : 1 + stk_rng_below(&r, 1000);
        }
        if (trial == 0) memset(counts, 0, sizeof counts), counts[7] = 3; /* one symbol */
        for (int k = 0; k < 256; k++) freq[k] = (long)counts[k];
        uint8_t bits[17], vals[256];
        ck_assert(stk_huff_optimal_table(counts, bits, vals));
        jpeg_gen_optimal_table(&c, ref, freq);
        ck_assert_msg(!memcmp(bits, ref->bits, 17), "trial %d: code lengths differ", trial);
        int n = 0, kraft = 0; /* in units of 2^-16 */
        for (int l = 1; l <= 16; l++) n += bits[l], kraft += bits[l] << (16 - l);
        ck_assert_msg(!memcmp(vals, ref->huffval, (size_t)n), "trial %d: symbols differ", trial);
        ck_assert_int_lt(kraft, 1 << 16); /* no code is all ones */
        for (int k = 0; k < 256; k++) {   /* every counted symbol has a code */
            bool coded = false;
            for (int i = 0; i < n; i++) coded |= vals[i] == k;
            ck_assert_int_eq(coded, counts[k] > 0);
        }
    }
    jpeg_destroy_compress(&c);
}
END_TEST

/* Decode [bx0,bx1) x [by0,by1) with and without segments; the pixels inside
 * the scaled bounds must be the same bytes. */
static void compare_paths(const char *name, const uint8_t *d, size_t len, uint32_t w, uint32_t h,
                          int bx0, int by0, int bx1, int by1, int out)
{
    stk_jpeg_region a, b;
    stk_jpeg_decoder_set_segments(dec, false);
    ck_assert_int_eq(stk_jpeg_decoder_region(dec, d, len, bx0, by0, bx1, by1, bx1 - bx0, by1 - by0,
                                             out, out, 3, w, h, &a),
                     STK_OK);
    uint8_t *ref = malloc(a.stride * (size_t)a.height);
    memcpy(ref, a.pixels, a.stride * (size_t)a.height);
    stk_jpeg_decoder_set_segments(dec, true);
    stk_status st = stk_jpeg_decoder_region(dec, d, len, bx0, by0, bx1, by1, bx1 - bx0, by1 - by0,
                                            out, out, 3, w, h, &b);
    ck_assert_msg(st == STK_OK, "%s: %s", name, stk_last_error());
    ck_assert_int_eq(a.scale, b.scale);
    int s = a.scale;
    int x0 = (int)floor(bx0 * s / 8.0), y0 = (int)floor(by0 * s / 8.0);
    int x1 = (int)ceil(bx1 * s / 8.0), y1 = (int)ceil(by1 * s / 8.0);
    int sw = (int)ceil(w * s / 8.0), sh = (int)ceil(h * s / 8.0);
    x1 = x1 > sw ? sw : x1, y1 = y1 > sh ? sh : y1;
    ck_assert(b.origin_x <= x0 && b.origin_x + b.width >= x1 && b.origin_y <= y0 &&
              b.origin_y + b.height >= y1);
    for (int y = y0; y < y1; y++)
        ck_assert_msg(
            !memcmp(ref + (size_t)(y - a.origin_y) * a.stride + (size_t)(x0 - a.origin_x) * 3,
                    b.pixels + (size_t)(y - b.origin_y) * b.stride + (size_t)(x0 - b.origin_x) * 3,
                    (size_t)(x1 - x0) * 3),
            "%s: row %d of [%d,%d)x[%d,%d) at scale %d/8 differs between the paths", name, y, bx0,
            bx1, by0, by1, s);
    free(ref);
}

START_TEST(segment_decode_equals_the_whole_stream_decode)
{
    stk_rng r;
    stk_rng_init(&r, 11, 0, 0);
    /* with libjpeg-turbo's entropy decoder (the default), then Stoke's */
    for (int stoke = 0; stoke < 2; stoke++) {
        ck_assert(stk_jpeg_decoder_set_entropy(dec, stoke));
        int64_t mcus = stk_jpeg_decoder_entropy_mcus(dec);
        for (int fast = 0; fast < 2; fast++) {
            stk_jpeg_decoder_set_fast(dec, fast);
            for (size_t f = 0; f < sizeof seg_files / sizeof *seg_files; f++)
                for (int target = 1; target <= 4; target *= 2) {
                    size_t len;
                    uint8_t *d = segmented(seg_files[f], target, &len, NULL);
                    stk_jpeg_info info;
                    ck_assert_int_eq(stk_jpeg_decoder_header(dec, d, len, &info), STK_OK);
                    int w = (int)info.width, h = (int)info.height;
                    char name[128];
                    snprintf(name, sizeof name, "%s (interval <= %d, %s)", seg_files[f], target,
                             fast ? "fast" : "accurate");
                    /* crops touching each border and corner, then random ones */
                    int edges[][4] = {{0, 0, w, h},
                                      {0, 0, (w + 1) / 2, h},
                                      {w / 2, 0, w, h},
                                      {0, 0, w, (h + 1) / 2},
                                      {0, h / 2, w, h},
                                      {w / 3, h / 3, w, h},
                                      {0, 0, w / 3 + 1, h / 3 + 1},
                                      {w / 4, h / 4, w - w / 4, h - h / 4}};
                    for (size_t e = 0; e < sizeof edges / sizeof *edges; e++)
                        if (edges[e][0] < edges[e][2] && edges[e][1] < edges[e][3])
                            compare_paths(name, d, len, info.width, info.height, edges[e][0],
                                          edges[e][1], edges[e][2], edges[e][3], 16);
                    for (int trial = 0; trial < 16; trial++) {
                        int bx0 = (int)stk_rng_below(&r, info.width),
                            by0 = (int)stk_rng_below(&r, info.height);
                        int bx1 = bx0 + 1 + (int)stk_rng_below(&r, info.width - (uint32_t)bx0);
                        int by1 = by0 + 1 + (int)stk_rng_below(&r, info.height - (uint32_t)by0);
                        compare_paths(name, d, len, info.width, info.height, bx0, by0, bx1, by1,
                                      1 + (int)stk_rng_below(&r, 64));
                    }
                    free(d);
                }
        }
        stk_jpeg_decoder_set_fast(dec, false);
        /* with Stoke's, the segments went through it (jpeg_entropy_hook.h) */
        if (stoke) ck_assert_int_gt(stk_jpeg_decoder_entropy_mcus(dec), mcus + 2000);
    }
    stk_jpeg_decoder_set_entropy(dec, stk_jpeg_entropy_vector()); /* the default */
}
END_TEST

/* Damaged entropy-coded data in the segments a crop needs: Stoke's entropy
 * decoder gives what libjpeg-turbo's gives, the same pixels or the same
 * error (it refuses what libjpeg-turbo would decode only with a warning, and
 * the decode falls back). Bytes flipped, dropped and added before a marker. */
START_TEST(damaged_segments_decode_as_libjpeg_does)
{
    size_t len;
    stk_jpeg_segments s = {0};
    stk_jpeg_info info;
    uint8_t *d = segmented_grid("single/large.jpg", 4, &len, &s, &info);
    int w = (int)info.width, h = (int)info.height;
    uint8_t *bad = malloc(len + 1), *ref = NULL;
    int same_pixels = 0, same_errors = 0;
    for (int edit = 0; edit < 3 * 120; edit++) {
        size_t at = s.data_at + (len - s.data_at - 2) * (size_t)(edit / 3) / 120, n = len;
        if (edit % 3 == 0) { /* a byte flipped */
            memcpy(bad, d, len);
            bad[at] ^= 0x24;
        } else if (edit % 3 == 1) { /* a byte gone */
            memcpy(bad, d, at);
            memcpy(bad + at, d + at + 1, len - at - 1);
            n = len - 1;
        } else { /* a byte more, before the next marker: data libjpeg-turbo calls extraneous */
            size_t k = 0;
            while (k + 1 < s.count && s.end[k] < at) k++;
            memcpy(bad, d, s.end[k]);
            bad[s.end[k]] = 0x5A;
            memcpy(bad + s.end[k] + 1, d + s.end[k], len - s.end[k]);
            n = len + 1;
        }
        stk_jpeg_region a, b;
        stk_jpeg_decoder_set_entropy(dec, false);
        stk_status sa =
            stk_jpeg_decoder_region(dec, bad, n, 0, h / 8, w, h, w, h - h / 8, 64, 64, 3, 0, 0, &a);
        if (sa == STK_OK) {
            free(ref);
            ref = malloc(a.stride * (size_t)a.height);
            memcpy(ref, a.pixels, a.stride * (size_t)a.height);
        }
        ck_assert(stk_jpeg_decoder_set_entropy(dec, true));
        stk_status sb =
            stk_jpeg_decoder_region(dec, bad, n, 0, h / 8, w, h, w, h - h / 8, 64, 64, 3, 0, 0, &b);
        ck_assert_msg(sa == sb, "edit %d at %zu: libjpeg-turbo's decoder %d, Stoke's %d", edit, at,
                      sa, sb);
        if (sa != STK_OK) {
            same_errors++;
            continue;
        }
        ck_assert(a.width == b.width && a.height == b.height && a.origin_x == b.origin_x &&
                  a.origin_y == b.origin_y);
        ck_assert_msg(!memcmp(ref, b.pixels, a.stride * (size_t)a.height),
                      "edit %d at %zu: the pixels differ", edit, at);
        same_pixels++;
    }
    stk_jpeg_decoder_set_entropy(dec, stk_jpeg_entropy_vector()); /* the default */
    /* both outcomes were reached (damage above the crop's rows, or that
     * libjpeg-turbo decodes without a warning; and damage it reports) */
    ck_assert_int_gt(same_pixels, 20);
    ck_assert_int_gt(same_errors, 20);
    free(ref);
    free(bad);
    stk_jpeg_segments_free(&s);
    free(d);
}
END_TEST

/* Segment k's entropy-coded bytes: [*begin, end). */
static size_t segment_bytes(const stk_jpeg_segments *s, size_t k, size_t *begin)
{
    *begin = k ? s->end[k - 1] + 2 : s->data_at;
    return s->end[k] - *begin;
}

/* jpeg_entropy.c's coefficients of every segment are libjpeg-turbo's
 * (jpeg_read_coefficients), block for block, on every fixture and interval. */
START_TEST(entropy_decode_equals_libjpeg)
{
    size_t blocks_checked = 0;
    for (size_t f = 0; f < sizeof seg_files / sizeof *seg_files; f++)
        for (int target = 1; target <= 8; target *= 4) {
            size_t len;
            uint8_t *d = segmented(seg_files[f], target, &len, NULL);
            stk_jpeg_segments s = {0};
            stk_jpeg_entropy e;
            ck_assert_int_eq(stk_jpeg_segments_parse(d, len, &s), STK_OK);
            ck_assert_msg(stk_jpeg_entropy_init(d, len, &e) == STK_OK, "%s: %s", seg_files[f],
                          stk_last_error());
            coefs c;
            read_coefs(&c, d, len);
            int16_t *coef = malloc((size_t)s.interval * (size_t)e.blocks * 64 * sizeof *coef);
            for (size_t k = 0; k < s.count; k++) {
                size_t begin, n = segment_bytes(&s, k, &begin);
                int64_t symbols;
                ck_assert_msg(
                    stk_jpeg_entropy_decode(&e, d + begin, n, s.interval, coef, &symbols) == STK_OK,
                    "%s segment %zu: %s", seg_files[f], k, stk_last_error());
                ck_assert_int_ge(symbols, (int64_t)s.interval * e.blocks * 2);
                int my = (int)(k / (size_t)s.per_row);
                for (int m = 0; m < s.interval; m++) {
                    int mx = (int)(k % (size_t)s.per_row) * s.interval + m;
                    for (int b = 0, first = 0; b < e.blocks; b++) {
                        int ci = e.comp_of_block[b];
                        if (b && e.comp_of_block[b - 1] != ci) first = b;
                        jpeg_component_info *comp = &c.d.comp_info[ci];
                        int h = e.ncomp == 1 ? 1 : comp->h_samp_factor;
                        int v = e.ncomp == 1 ? 1 : comp->v_samp_factor;
                        int row = my * v + (b - first) / h, col = mx * h + (b - first) % h;
                        JBLOCKARRAY r = c.d.mem->access_virt_barray(
                            (j_common_ptr)&c.d, c.arrays[ci], (JDIMENSION)row, 1, FALSE);
                        const int16_t *mine =
                            coef + ((size_t)m * (size_t)e.blocks + (size_t)b) * 64;
                        ck_assert_msg(!memcmp(mine, r[0][col], 64 * sizeof *mine),
                                      "%s interval %d: segment %zu MCU %d block %d differs",
                                      seg_files[f], s.interval, k, m, b);
                        blocks_checked++;
                    }
                }
            }
            /* a segment cut in half ends before its MCUs do: refused */
            size_t begin, n = segment_bytes(&s, s.count / 2, &begin);
            if (n > 64) {
                ck_assert_int_eq(
                    stk_jpeg_entropy_decode(&e, d + begin, n / 2, s.interval, coef, NULL),
                    STK_ERR_CORRUPT);
            }
            /* damaged bytes: an error or some coefficients, never a crash */
            uint8_t *bad = malloc(len);
            for (size_t at = begin; at < begin + n; at += n / 13 + 1) {
                memcpy(bad, d, len);
                bad[at] ^= 0x5A;
                stk_jpeg_entropy_decode(&e, bad + begin, n, s.interval, coef, NULL);
            }
            free(bad);
            /* every cut header: refused */
            for (size_t cut = 0; cut < s.data_at; cut += 7) {
                stk_jpeg_entropy t;
                ck_assert_int_ne(stk_jpeg_entropy_init(d, cut, &t), STK_OK);
            }
            free(coef);
            jpeg_destroy_decompress(&c.d);
            stk_jpeg_segments_free(&s);
            free(d);
        }
    ck_assert_uint_gt(blocks_checked, 10000);
}
END_TEST

/* stk_jpeg_entropy_decode_all (on AVX-512: 16 segments at once) gives the
 * per-segment decoder's coefficients, and refuses what it refuses: every
 * fixture and interval, and damaged copies (bytes flipped in the data). */
START_TEST(entropy_decode_all_equals_per_segment)
{
    if (!stk_jpeg_entropy_vector())
        fprintf(stderr, "entropy_decode_all_equals_per_segment: no AVX-512 here, the scalar "
                        "path only\n");
    stk_jpeg_entropy_scratch scratch = {0};
    size_t compared = 0, refused = 0;
    for (size_t f = 0; f < sizeof seg_files / sizeof *seg_files; f++)
        for (int target = 1; target <= 8; target *= 2) {
            size_t len;
            uint8_t *d = segmented(seg_files[f], target, &len, NULL);
            stk_jpeg_segments s = {0};
            ck_assert_int_eq(stk_jpeg_segments_parse(d, len, &s), STK_OK);
            stk_jpeg_entropy *e = malloc(sizeof *e);
            ck_assert_int_eq(stk_jpeg_entropy_init(d, len, e), STK_OK);
            size_t per = (size_t)s.interval * (size_t)e->blocks * 64;
            stk_jpeg_segment_bytes *segs = malloc(s.count * sizeof *segs);
            int16_t *all = malloc(s.count * per * 2), *one = malloc(s.count * per * 2);
            uint8_t *bad = malloc(len);
            for (int trial = 0; trial < 24; trial++) {
                memcpy(bad, d, len);
                if (trial) /* damage: a byte of the entropy-coded data flipped */
                    bad[s.data_at + (size_t)trial * 7919 % (len - s.data_at - 2)] ^= 0x41;
                stk_status each = STK_OK;
                for (size_t k = 0; k < s.count; k++) {
                    size_t begin = k ? s.end[k - 1] + 2 : s.data_at;
                    segs[k] = (stk_jpeg_segment_bytes){bad + begin, s.end[k] - begin};
                    if (each == STK_OK)
                        each = stk_jpeg_entropy_decode(e, segs[k].data, segs[k].len, s.interval,
                                                       one + k * per, NULL);
                }
                stk_status st =
                    stk_jpeg_entropy_decode_all(e, segs, s.count, s.interval, all, &scratch);
                ck_assert_msg(st == each, "%s interval %d trial %d: %d all at once, %d one by one",
                              seg_files[f], s.interval, trial, st, each);
                if (st != STK_OK) {
                    refused++;
                    continue;
                }
                ck_assert_msg(!memcmp(all, one, s.count * per * 2),
                              "%s interval %d trial %d: the coefficients differ", seg_files[f],
                              s.interval, trial);
                compared += s.count;
            }
            free(bad);
            free(all);
            free(one);
            free(segs);
            free(e);
            stk_jpeg_segments_free(&s);
            free(d);
        }
    stk_jpeg_entropy_scratch_free(&scratch);
    ck_assert_uint_gt(compared, 5000);
    ck_assert_uint_gt(refused, 20);
}
END_TEST

START_TEST(damaged_segments_fail_cleanly)
{
    size_t len;
    stk_jpeg_segments s = {0};
    stk_jpeg_info info;
    uint8_t *d = segmented_grid("single/large.jpg", 1, &len, &s, &info);
    size_t marker = s.end[s.count / 2]; /* a restart marker in the middle */
    uint8_t *bad = malloc(len);
    int w = (int)info.width, h = (int)info.height;
    struct {
        size_t at;
        uint8_t value;
    } edits[] = {{marker + 1, 0xD7},   /* out of order */
                 {marker + 1, 0xC4},   /* another marker inside the scan */
                 {marker, 0x12},       /* the marker gone: one segment fewer */
                 {s.sof_at + 7, 0x7F}, /* width: segments no longer divide the row */
                 {s.data_at + 3, 0xFF}};
    for (size_t e = 0; e < sizeof edits / sizeof *edits; e++) {
        memcpy(bad, d, len);
        bad[edits[e].at] = edits[e].value;
        stk_jpeg_region reg;
        stk_status st = stk_jpeg_decoder_region(dec, bad, len, w / 4, h / 4, w / 2, h / 2, w / 4,
                                                h / 4, 8, 8, 3, 0, 0, &reg);
        ck_assert_msg(st == STK_OK || st == STK_ERR_CORRUPT || st == STK_ERR_UNSUPPORTED ||
                          st == STK_ERR_LIMIT,
                      "edit %zu: status %d", e, st);
    }
    /* every truncation: parse and decode stop with an error, never read past the end */
    for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
        uint8_t *t = malloc(cut ? cut : 1);
        memcpy(t, d, cut);
        ck_assert_int_ne(stk_jpeg_segments_parse(t, cut, &s), STK_OK);
        stk_jpeg_region reg;
        stk_jpeg_decoder_region(dec, t, cut, 0, 0, 8, 8, 8, 8, 8, 8, 3, 0, 0, &reg);
        free(t);
    }
    /* the pixel limit holds for the whole image, not just the crop's JPEG */
    stk_jpeg_decoder *small;
    ck_assert_int_eq(stk_jpeg_decoder_create((uint64_t)w * (uint64_t)h - 1, &small), STK_OK);
    stk_jpeg_region reg;
    ck_assert_int_eq(stk_jpeg_decoder_region(small, d, len, 0, 0, 8, 8, 8, 8, 8, 8, 3, 0, 0, &reg),
                     STK_ERR_LIMIT);
    stk_jpeg_decoder_destroy(small);
    stk_jpeg_segments_free(&s);
    free(bad);
    free(d);
}
END_TEST

START_TEST(scan_limit_refuses_progressive_files)
{
    size_t len;
    uint8_t *d = load("single/progressive.jpg", &len);
    stk_jpeg_info info;
    stk_jpeg_region reg;
    ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, NULL), STK_OK);
    stk_jpeg_decoder_set_max_scans(dec, 2); /* PIL writes about 10 scans */
    ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, NULL), STK_ERR_LIMIT);
    ck_assert(strstr(stk_last_error(), "more than 2 scans"));
    ck_assert_int_eq(
        stk_jpeg_decoder_region(dec, d, len, 0, 0, 50, 50, 50, 50, 8, 8, 3, 0, 0, &reg),
        STK_ERR_LIMIT);
    stk_jpeg_decoder_set_max_scans(dec, STK_JPEG_MAX_SCANS);
    ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, NULL), STK_OK);
    free(d);
}
END_TEST

START_TEST(roi_decode_rejects_a_wrong_size_and_bad_bounds)
{
    size_t len;
    uint8_t *d = load("single/baseline.jpg", &len);
    stk_jpeg_region reg;
    ck_assert_int_eq(
        stk_jpeg_decoder_region(dec, d, len, 0, 0, 10, 10, 10, 10, 4, 4, 3, 65, 48, &reg),
        STK_ERR_CORRUPT);
    ck_assert(strstr(stk_last_error(), "record says 65x48"));
    ck_assert_int_eq(
        stk_jpeg_decoder_region(dec, d, len, 0, 0, 65, 10, 65, 10, 4, 4, 3, 0, 0, &reg),
        STK_ERR_INVALID_ARG);
    free(d);
}
END_TEST

/* Every prefix and many single-byte flips of a small JPEG: errors, never a
 * crash, a hang or a leak (ASan and the sanitizer build watch). */
START_TEST(truncations_and_flips_fail_cleanly)
{
    size_t len;
    uint8_t *d = load("single/sub420.jpg", &len);
    uint8_t *copy = malloc(len);
    int errors = 0;
    for (size_t n = 0; n < len; n++) {
        stk_jpeg_info info;
        stk_jpeg_region reg;
        errors += stk_jpeg_decoder_validate(dec, d, n, &info, NULL) != STK_OK;
        stk_jpeg_decoder_region(dec, d, n, 0, 0, 75, 53, 75, 53, 32, 32, 3, 0, 0, &reg);
    }
    ck_assert_uint_ge((size_t)errors, len - 2); /* at most the EOI marker may go missing */
    stk_rng r;
    stk_rng_init(&r, 11, 0, 0);
    int flip_errors = 0;
    for (int t = 0; t < 600; t++) {
        memcpy(copy, d, len);
        size_t at = stk_rng_below(&r, (uint32_t)len);
        copy[at] ^= (uint8_t)(1 + stk_rng_below(&r, 255));
        stk_jpeg_info info;
        stk_jpeg_region reg;
        flip_errors += stk_jpeg_decoder_validate(dec, copy, len, &info, NULL) != STK_OK;
        stk_jpeg_decoder_region(dec, copy, len, 10, 5, 60, 40, 50, 35, 16, 16, 3, 0, 0, &reg);
    }
    ck_assert_int_gt(flip_errors, 50);
    /* and the decoder still works */
    stk_jpeg_info info;
    ck_assert_int_eq(stk_jpeg_decoder_validate(dec, d, len, &info, NULL), STK_OK);
    free(copy);
    free(d);
}
END_TEST

/* ---- transform specs ---- */

START_TEST(spec_parsing)
{
    stk_transform t;
    char buf[256];
    ck_assert_int_eq(stk_transform_parse("rrc:224,flip", &t), STK_OK);
    ck_assert_int_eq(t.rrc, 224);
    ck_assert(t.flip == 0.5 && t.scale[0] == 0.08 && t.ratio[1] > 1.33);
    ck_assert_int_eq(stk_transform_parse("resize:256,center:224,norm:imagenet", &t), STK_OK);
    ck_assert_int_eq(t.norm, STK_NORM_IMAGENET);
    int size;
    ck_assert(stk_transform_fixed_size(&t, &size) && size == 224);
    ck_assert_int_eq(stk_transform_parse("pad:4,crop:28,flip:0.25,norm:0.286/0.353", &t), STK_OK);
    ck_assert(t.pad == 4 && t.crop == 28 && t.flip == 0.25 && t.norm_values == 1);
    ck_assert(fabsf(t.std[2] - 0.353f) < 1e-6f);
    ck_assert_int_eq(stk_transform_parse("rrc:96:0.25:1,norm:0.5:0.4:0.3/0.2:0.2:0.1", &t), STK_OK);
    stk_transform_format(&t, buf, sizeof buf);
    ck_assert_str_eq(buf, "rrc:96:0.25:1,norm:0.5:0.4:0.3/0.2:0.2:0.1");
    ck_assert_int_eq(stk_transform_parse("resize:256", &t), STK_OK);
    ck_assert(!stk_transform_fixed_size(&t, &size));
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"rrc:0", "transform \"rrc:0\": size must be"},
        {"rrc:224,flop", "transform \"flop\": unknown transform"},
        {"rrc:224:0.5:0.1", "transform \"rrc:224:0.5:0.1\": scale range"},
        {"flip:2", "transform \"flip:2\""},
        {"norm:1/0", "std must be positive"},
        {"norm:1:2/3", "give 1 or 3 means"},
        {"rrc:224,resize:256", "use one of rrc"},
        {"pad:4", "pad goes with crop"},
        {"resize:200,center:224", "center:224 is larger than resize:200"},
        {"none,flip", "none takes no other"},
        {"", "empty spec"},
        {"resize:abc", "transform \"resize:abc\""},
        {",", "an empty token"},
        {"flip,,crop:8", "an empty token"},
        {"crop:8,", "an empty token"},
        {"norm:1e300/1", "means must lie within"},
        {"norm:0.5/1e-300", "stds within"},
        {"norm:nan/1", "means and stds must be numbers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(stk_transform_parse(bad[i].spec, &t), STK_ERR_INVALID_ARG);
        ck_assert_msg(strstr(stk_last_error(), bad[i].msg), "%s -> %s", bad[i].spec,
                      stk_last_error());
    }
}
END_TEST

/* Only a random crop can fail to fit; the check names the sizes. */
START_TEST(transform_fits_smallest_images)
{
    stk_transform t;
    ck_assert_int_eq(stk_transform_parse("pad:4,crop:36", &t), STK_OK);
    ck_assert_int_eq(stk_transform_check_fits(&t, 28, 28), STK_OK);
    ck_assert_int_eq(stk_transform_check_fits(&t, 28, 27), STK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(stk_last_error(), "crop:36 is larger than the smallest images (28x27, "
                                           "36x35 with pad:4)"),
                  "%s", stk_last_error());
    ck_assert_int_eq(stk_transform_parse("rrc:224", &t), STK_OK);
    ck_assert_int_eq(stk_transform_check_fits(&t, 1, 1), STK_OK);
    ck_assert_int_eq(stk_transform_parse("center:64", &t), STK_OK);
    ck_assert_int_eq(stk_transform_check_fits(&t, 8, 8), STK_OK); /* pads, as torchvision */
}
END_TEST

/* ---- geometry ---- */

START_TEST(plan_geometry_edge_cases)
{
    stk_transform t;
    stk_sample_plan p;
    static const uint32_t sizes[][2] = {{1, 1}, {10000, 2}, {2, 10000}, {640, 480}, {3, 5}};
    ck_assert_int_eq(stk_transform_parse("rrc:224,flip", &t), STK_OK);
    for (size_t s = 0; s < 5; s++)
        for (uint64_t i = 0; i < 200; i++) {
            uint32_t w = sizes[s][0], h = sizes[s][1];
            ck_assert_int_eq(stk_plan_sample(&t, w, h, 3, 1, i, &p), STK_OK);
            ck_assert(p.x0 >= 0 && p.y0 >= 0 && p.w >= 1 && p.h >= 1);
            ck_assert(p.x0 + p.w <= w && p.y0 + p.h <= h);
            ck_assert(p.bx0 == (int)p.x0 && p.bx1 == (int)(p.x0 + p.w)); /* crop first */
            ck_assert(p.out_w == 224 && p.out_h == 224 && p.resize);
            if (s == 1) { /* 10000x2: no attempt fits the aspect range: the fallback */
                ck_assert(p.h == 2 && fabs(p.w - 3) < 1e-9);
            }
        }
    /* Area and aspect stay in range on a normal image (accepted attempts). */
    int accepted = 0;
    for (uint64_t i = 0; i < 500; i++) {
        stk_plan_sample(&t, 640, 480, 3, 0, i, &p);
        double area = p.w * p.h / (640.0 * 480.0), aspect = p.w / p.h;
        if (area >= 0.07 && area <= 1.0 && aspect >= 0.74 && aspect <= 1.34) accepted++;
    }
    ck_assert_int_gt(accepted, 480);
    /* Resize(256) + CenterCrop(224), torchvision's numbers for 500x375. */
    ck_assert_int_eq(stk_transform_parse("resize:256,center:224", &t), STK_OK);
    ck_assert_int_eq(stk_plan_sample(&t, 500, 375, 0, 0, 0, &p), STK_OK);
    /* resized 341x256; left = round(117 / 2) = 58 (half to even), top = 16 */
    ck_assert(fabs(p.x0 - 58 * 500.0 / 341) < 1e-9 && fabs(p.y0 - 16 * 375.0 / 256) < 1e-9);
    ck_assert(p.bx0 == 0 && p.bx1 == 500 && p.out_w == 224);
    ck_assert_int_eq(stk_plan_sample(&t, 1, 1, 0, 0, 0, &p), STK_OK);
    ck_assert_int_eq(stk_plan_sample(&t, 10000, 2, 0, 0, 0, &p), STK_OK);
    /* Sides past JPEG's 65535 are refused before any int arithmetic on them. */
    ck_assert_int_eq(stk_plan_sample(&t, 65535, 65535, 0, 0, 0, &p), STK_OK);
    ck_assert_int_eq(stk_plan_sample(&t, 2147483647u, 9, 0, 0, 0, &p), STK_ERR_INVALID_ARG);
    ck_assert_int_eq(stk_plan_sample(&t, 9, 4294967295u, 0, 0, 0, &p), STK_ERR_INVALID_ARG);
    /* RandomCrop(28, padding=4) on 28x28: offsets -4..4, every one reachable. */
    ck_assert_int_eq(stk_transform_parse("pad:4,crop:28", &t), STK_OK);
    int seen[9] = {0};
    for (uint64_t i = 0; i < 2000; i++) {
        ck_assert_int_eq(stk_plan_sample(&t, 28, 28, 5, 0, i, &p), STK_OK);
        ck_assert(p.x0 >= -4 && p.x0 <= 4 && p.y0 >= -4 && p.y0 <= 4 && !p.resize);
        seen[(int)p.x0 + 4]++;
    }
    for (int k = 0; k < 9; k++) ck_assert_int_gt(seen[k], 100);
    ck_assert_int_eq(stk_transform_parse("crop:40", &t), STK_OK);
    ck_assert_int_eq(stk_plan_sample(&t, 28, 28, 5, 0, 0, &p), STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "crop:40 is larger"));
}
END_TEST

/* ---- the augment pipeline ---- */

static stk_augment *augment(const char *spec, stk_pixel_format f, int channels, bool fast)
{
    stk_augment_options o = {.spec = spec,
                             .format = f,
                             .channels = channels,
                             .seed = 99,
                             .mean = {0.5f, 0.5f, 0.5f},
                             .std = {0.25f, 0.25f, 0.25f},
                             .fast_decode = fast};
    stk_augment *a;
    ck_assert_msg(stk_augment_create(&o, &a) == STK_OK, "%s", stk_last_error());
    return a;
}

static stk_sample jpeg_sample(const uint8_t *d, size_t len)
{
    stk_jpeg_info info;
    ck_assert_int_eq(stk_jpeg_decoder_header(dec, d, len, &info), STK_OK);
    return (stk_sample){1, d, len, info.width, info.height, 3};
}

START_TEST(flip_is_an_exact_mirror)
{
    size_t len;
    uint8_t *d = load("single/large.jpg", &len);
    stk_sample s = jpeg_sample(d, len);
    const char *specs[][2] = {{"rrc:64", "rrc:64,flip:1"},
                              {"resize:40,center:32", "resize:40,center:32,flip:1"}};
    for (int k = 0; k < 2; k++) {
        stk_augment *a = augment(specs[k][0], STK_PIXELS_U8_HWC, 3, false);
        stk_augment *b = augment(specs[k][1], STK_PIXELS_U8_HWC, 3, false);
        int n = k == 0 ? 64 : 32;
        uint8_t *x = malloc((size_t)n * n * 3), *y = malloc((size_t)n * n * 3);
        for (uint64_t i = 0; i < 8; i++) {
            stk_augment_out ox = {x, (size_t)n * 3, (size_t)n * n * 3, 0, 0, 0};
            stk_augment_out oy = {y, (size_t)n * 3, (size_t)n * n * 3, 0, 0, 0};
            ck_assert_int_eq(stk_augment_apply(a, &s, 0, i, &ox), STK_OK);
            ck_assert_int_eq(stk_augment_apply(b, &s, 0, i, &oy), STK_OK);
            for (int r = 0; r < n; r++)
                for (int c = 0; c < n; c++)
                    ck_assert(memcmp(x + ((size_t)r * n + c) * 3,
                                     y + ((size_t)r * n + (n - 1 - c)) * 3, 3) == 0);
        }
        free(x);
        free(y);
        stk_augment_destroy(a);
        stk_augment_destroy(b);
    }
    free(d);
}
END_TEST

START_TEST(raw_images_and_edge_sizes)
{
    /* 1x1 RGB raw: any crop resized to 8x8 is that one colour. */
    uint8_t one[3] = {10, 200, 77}, out[64 * 64 * 3];
    stk_sample s = {2, one, 3, 1, 1, 3};
    stk_augment *a = augment("rrc:8,flip", STK_PIXELS_U8_HWC, 3, false);
    stk_augment_out o = {out, 24, sizeof out, 0, 0, 0};
    ck_assert_int_eq(stk_augment_apply(a, &s, 0, 0, &o), STK_OK);
    for (int i = 0; i < 64; i++) ck_assert(memcmp(out + 3 * i, one, 3) == 0);
    stk_augment_destroy(a);
    /* 10000x2 gray raw. */
    uint8_t *wide = malloc(20000);
    for (int i = 0; i < 20000; i++) wide[i] = (uint8_t)i;
    stk_sample w = {2, wide, 20000, 10000, 2, 1};
    a = augment("rrc:16", STK_PIXELS_U8_HWC, 1, false);
    o = (stk_augment_out){out, 16, sizeof out, 0, 0, 0};
    ck_assert_int_eq(stk_augment_apply(a, &w, 0, 3, &o), STK_OK);
    stk_augment_destroy(a);
    /* RandomCrop with padding copies exactly the planned window, zeros outside. */
    uint8_t img[28 * 28];
    for (int i = 0; i < 28 * 28; i++) img[i] = (uint8_t)(1 + i % 250);
    stk_sample m = {2, img, sizeof img, 28, 28, 1};
    a = augment("pad:4,crop:28", STK_PIXELS_U8_HWC, 1, false);
    stk_transform t;
    stk_transform_parse("pad:4,crop:28", &t);
    for (uint64_t i = 0; i < 30; i++) {
        o = (stk_augment_out){out, 28, sizeof out, 0, 0, 0};
        ck_assert_int_eq(stk_augment_apply(a, &m, 2, i, &o), STK_OK);
        stk_sample_plan p;
        stk_plan_sample(&t, 28, 28, 99, 2, i, &p);
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++) {
                int sx = (int)p.x0 + x, sy = (int)p.y0 + y;
                uint8_t want = sx < 0 || sy < 0 || sx >= 28 || sy >= 28 ? 0 : img[sy * 28 + sx];
                ck_assert_uint_eq(out[y * 28 + x], want);
            }
    }
    /* Errors: wrong channel count, short output, corrupt JPEG. */
    uint8_t rgb[12] = {0};
    stk_sample bad = {2, rgb, 12, 2, 2, 3};
    ck_assert_int_eq(stk_augment_apply(a, &bad, 0, 0, &o), STK_ERR_INVALID_ARG);
    o.capacity = 100;
    ck_assert_int_eq(stk_augment_apply(a, &m, 0, 0, &o), STK_ERR_INVALID_ARG);
    stk_augment_destroy(a);
    size_t len;
    uint8_t *d = load("bad/truncated.jpg", &len);
    a = augment("rrc:16", STK_PIXELS_U8_HWC, 3, false);
    stk_sample tj = {1, d, len, 64, 48, 3};
    o = (stk_augment_out){out, 48, sizeof out, 0, 0, 0};
    ck_assert_int_eq(stk_augment_apply(a, &tj, 0, 0, &o), STK_ERR_CORRUPT);
    stk_augment_destroy(a);
    free(d);
    free(wide);
}
END_TEST

START_TEST(output_formats_and_normalisation)
{
    uint8_t img[16 * 16 * 3];
    for (int i = 0; i < 16 * 16; i++) img[3 * i] = 128, img[3 * i + 1] = 64, img[3 * i + 2] = 255;
    stk_sample s = {2, img, sizeof img, 16, 16, 3};
    /* f32 CHW with norm (the dataset's 0.5/0.25 from the options), resize and copy paths */
    const char *specs[] = {"rrc:8,norm", "pad:2,crop:8,norm"};
    for (int k = 0; k < 2; k++) {
        stk_augment *a = augment(specs[k], STK_PIXELS_F32_CHW, 3, false);
        float f[3 * 8 * 8 + 8];
        f[3 * 64] = 12345.0f; /* canary after the output */
        stk_augment_out o = {f, 8 * 4, 3 * 64 * 4, 0, 0, 0};
        ck_assert_int_eq(stk_augment_apply(a, &s, 0, 1, &o), STK_OK);
        const float want[3] = {(128 / 255.0f - 0.5f) / 0.25f, (64 / 255.0f - 0.5f) / 0.25f,
                               (255 / 255.0f - 0.5f) / 0.25f};
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 64; i++) {
                float v = f[c * 64 + i];
                if (k == 1 && v == (0 - 0.5f) / 0.25f) continue; /* zero padding */
                ck_assert_msg(fabsf(v - want[c]) < 1e-5f, "channel %d: %f, want %f", c, v, want[c]);
            }
        ck_assert(f[3 * 64] == 12345.0f);
        stk_augment_destroy(a);
    }
    /* f16 CHW: the f32 values rounded to half */
    stk_augment *a32 = augment("rrc:8,norm:imagenet", STK_PIXELS_F32_CHW, 3, false);
    stk_augment *a16 = augment("rrc:8,norm:imagenet", STK_PIXELS_F16_CHW, 3, false);
    float f[3 * 64];
    uint16_t h[3 * 64];
    stk_augment_out o32 = {f, 32, sizeof f, 0, 0, 0}, o16 = {h, 16, sizeof h, 0, 0, 0};
    ck_assert_int_eq(stk_augment_apply(a32, &s, 0, 5, &o32), STK_OK);
    ck_assert_int_eq(stk_augment_apply(a16, &s, 0, 5, &o16), STK_OK);
    for (int i = 0; i < 3 * 64; i++) ck_assert_uint_eq(h[i], stk_f32_to_f16(f[i]));
    ck_assert(fabsf(f[0] - (128 / 255.0f - 0.485f) / 0.229f) < 1e-4f);
    stk_augment_destroy(a32);
    stk_augment_destroy(a16);
    /* u8 CHW is HWC transposed; a wider stride leaves the gap alone */
    size_t len;
    uint8_t *d = load("single/baseline.jpg", &len);
    stk_sample js = jpeg_sample(d, len);
    stk_augment *hwc = augment("resize:20,center:16", STK_PIXELS_U8_HWC, 3, false);
    stk_augment *chw = augment("resize:20,center:16", STK_PIXELS_U8_CHW, 3, false);
    uint8_t x[16 * 64], y[3 * 16 * 20];
    memset(x, 0xAB, sizeof x);
    stk_augment_out ox = {x, 64, sizeof x, 0, 0, 0}, oy = {y, 20, sizeof y, 0, 0, 0};
    ck_assert_int_eq(stk_augment_apply(hwc, &js, 0, 0, &ox), STK_OK);
    ck_assert_int_eq(stk_augment_apply(chw, &js, 0, 0, &oy), STK_OK);
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++)
            for (int k = 0; k < 3; k++)
                ck_assert_uint_eq(x[r * 64 + c * 3 + k], y[(k * 16 + r) * 20 + c]);
        for (int g = 48; g < 64; g++) ck_assert_uint_eq(x[r * 64 + g], 0xAB);
    }
    stk_augment_destroy(hwc);
    stk_augment_destroy(chw);
    free(d);
    /* norm without the dataset's stats is an error at creation */
    stk_augment_options bad = {.spec = "rrc:8,norm", .channels = 3};
    stk_augment *z;
    ck_assert_int_eq(stk_augment_create(&bad, &z), STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "mean/std"));
}
END_TEST

typedef struct det_ctx {
    const stk_sample *s;
    uint8_t out[16][32 * 32 * 3];
} det_ctx;

static void *det_thread(void *p)
{
    det_ctx *c = p;
    stk_augment *a = augment("rrc:32,flip", STK_PIXELS_U8_HWC, 3, true);
    for (int i = 15; i >= 0; i--) { /* another order than the main thread */
        stk_augment_out o = {c->out[i], 96, sizeof c->out[i], 0, 0, 0};
        stk_augment_apply(a, c->s, 4, (uint64_t)i, &o);
    }
    stk_augment_destroy(a);
    return NULL;
}

START_TEST(same_sample_same_bytes_other_epoch_other_crop)
{
    size_t len;
    uint8_t *d = load("single/large.jpg", &len);
    stk_sample s = jpeg_sample(d, len);
    det_ctx *t1 = calloc(1, sizeof *t1), *t2 = calloc(1, sizeof *t2);
    t1->s = t2->s = &s;
    pthread_t th;
    pthread_create(&th, NULL, det_thread, t2);
    stk_augment *a = augment("rrc:32,flip", STK_PIXELS_U8_HWC, 3, true);
    for (int i = 0; i < 16; i++) {
        stk_augment_out o = {t1->out[i], 96, sizeof t1->out[i], 0, 0, 0};
        ck_assert_int_eq(stk_augment_apply(a, &s, 4, (uint64_t)i, &o), STK_OK);
    }
    pthread_join(th, NULL);
    ck_assert(memcmp(t1->out, t2->out, sizeof t1->out) == 0);
    uint8_t other[32 * 32 * 3];
    int differ = 0;
    for (int i = 0; i < 16; i++) {
        stk_augment_out o = {other, 96, sizeof other, 0, 0, 0};
        stk_augment_apply(a, &s, 5, (uint64_t)i, &o);
        differ += memcmp(other, t1->out[i], sizeof other) != 0;
    }
    ck_assert_int_ge(differ, 15);
    stk_augment_destroy(a);
    free(t1);
    free(t2);
    free(d);
}
END_TEST

/* ---- resize quality ---- */

/* Reference: double-precision PIL-style triangle filter over the whole
 * image (resize to ow x oh), then the centre crop. Written independently of
 * augment/resize.c. */
static double *reference_resize_center(const uint8_t *px, int w, int h, int size, int crop)
{
    int ow = w <= h ? size : (int)((double)size * w / h),
        oh = w <= h ? (int)((double)size * h / w) : size;
    double *tmp = calloc((size_t)ow * (size_t)h * 3, sizeof *tmp);
    double *res = calloc((size_t)ow * (size_t)oh * 3, sizeof *res);
    for (int axis = 0; axis < 2; axis++) {
        int in = axis ? h : w, out = axis ? oh : ow;
        double scale = (double)in / out, fs = scale > 1 ? scale : 1, support = fs;
        for (int i = 0; i < out; i++) {
            double center = (i + 0.5) * scale, wsum = 0, wts[64];
            int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
            if (lo < 0) lo = 0;
            if (hi > in) hi = in;
            for (int k = lo; k < hi; k++) {
                double x = fabs((k - center + 0.5) / fs);
                wts[k - lo] = x < 1 ? 1 - x : 0;
                wsum += wts[k - lo];
            }
            for (int k = lo; k < hi; k++) {
                double wk = wts[k - lo] / wsum;
                if (axis == 0)
                    for (int y = 0; y < h; y++)
                        for (int c = 0; c < 3; c++)
                            tmp[((size_t)y * ow + i) * 3 + c] +=
                                wk * px[((size_t)y * w + k) * 3 + c];
                else
                    for (int x = 0; x < ow; x++)
                        for (int c = 0; c < 3; c++)
                            res[((size_t)i * ow + x) * 3 + c] +=
                                wk * tmp[((size_t)k * ow + x) * 3 + c];
            }
        }
    }
    double *outp = malloc((size_t)crop * crop * 3 * sizeof *outp);
    int left = (int)rint((ow - crop) / 2.0), top = (int)rint((oh - crop) / 2.0);
    for (int y = 0; y < crop; y++)
        memcpy(outp + (size_t)y * crop * 3, res + ((size_t)(top + y) * ow + left) * 3,
               (size_t)crop * 3 * sizeof *outp);
    free(tmp);
    free(res);
    return outp;
}

static uint8_t *read_ppm_gz(const char *path)
{
    gzFile f = gzopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char head[16];
    ck_assert_int_eq(gzread(f, head, 15), 15);
    ck_assert(memcmp(head, "P6\n224 224\n255\n", 15) == 0);
    uint8_t *px = malloc(224 * 224 * 3);
    ck_assert_int_eq(gzread(f, px, 224 * 224 * 3), 224 * 224 * 3);
    gzclose(f);
    return px;
}

START_TEST(resize_quality_against_float_and_pil)
{
    const char *data = getenv("STOKE_TEST_DATA") ? getenv("STOKE_TEST_DATA") : "../tests/data";
    stk_augment *a = augment("resize:256,center:224", STK_PIXELS_U8_HWC, 3, false);
    for (int i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/photos/photo%d.jpg", data, i);
        uint8_t *d;
        size_t len;
        ck_assert_int_eq(stk_file_read_all(path, 1 << 24, &d, &len), STK_OK);
        stk_sample s = jpeg_sample(d, len);
        uint8_t out[224 * 224 * 3];
        stk_augment_out o = {out, 224 * 3, sizeof out, 0, 0, 0};
        ck_assert_int_eq(stk_augment_apply(a, &s, 0, 0, &o), STK_OK);
        uint32_t w, h;
        uint8_t *full = decode_full_rgb(d, len, 8, &w, &h);
        double *ref = reference_resize_center(full, (int)w, (int)h, 256, 224);
        double se = 0;
        for (int k = 0; k < 224 * 224 * 3; k++) se += (out[k] - ref[k]) * (out[k] - ref[k]);
        double q_ref = 10 * log10(255.0 * 255.0 / (se / (224 * 224 * 3)));
        snprintf(path, sizeof path, "%s/photos/photo%d.pil.ppm.gz", data, i);
        uint8_t *pil = read_ppm_gz(path);
        double q_pil = psnr(out, pil, 224 * 224 * 3);
        printf("photo%d (%ux%u, DCT scale %d/8): %.1f dB against the float reference, %.1f dB "
               "against PIL\n",
               i, w, h, o.dct_scale, q_ref, q_pil);
        ck_assert_msg(q_ref >= 40, "photo%d: %.1f dB against the float reference", i, q_ref);
        ck_assert_msg(q_pil >= 33, "photo%d: %.1f dB against PIL", i, q_pil);
        free(pil);
        free(ref);
        free(full);
        free(d);
    }
    stk_augment_destroy(a);
}
END_TEST

START_TEST(half_conversion)
{
    ck_assert_uint_eq(stk_f32_to_f16(1.0f), 0x3C00);
    ck_assert_uint_eq(stk_f32_to_f16(-2.0f), 0xC000);
    ck_assert_uint_eq(stk_f32_to_f16(65504.0f), 0x7BFF);
    ck_assert_uint_eq(stk_f32_to_f16(65520.0f), 0x7C00); /* rounds to infinity */
    ck_assert_uint_eq(stk_f32_to_f16(5.9604645e-08f), 0x0001);
    ck_assert_uint_eq(stk_f32_to_f16(1.0f + 1.0f / 2048), 0x3C00); /* tie to even */
    ck_assert_uint_eq(stk_f32_to_f16(1.0f + 3.0f / 2048), 0x3C02);
    for (uint32_t h = 0; h < 65536; h++) {
        float f = stk_f16_to_f32((uint16_t)h);
        if (isnan(f)) {
            ck_assert(isnan(stk_f16_to_f32(stk_f32_to_f16(f))));
            continue;
        }
        ck_assert_uint_eq(stk_f32_to_f16(f), h);
    }
}
END_TEST

/* PNGs of every colour type and depth PIL writes decode to PIL's own RGB
 * and L pixels (16-bit: the high byte); damaged ones are refused with the
 * reason; a bomb-sized header is refused before any allocation. */
START_TEST(png_decodes_like_pil)
{
    const char *kinds[] = {"rgb8", "rgba8", "l8", "la8", "p8", "p4", "l1", "l16"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "png/%s.png", kinds[k]);
        size_t len;
        uint8_t *png = load(rel, &len);
        ck_assert(stk_png_sniff(png, len));
        for (int ch = 1; ch <= 3; ch += 2) {
            if (ch == 3 && !strcmp(kinds[k], "l16")) continue; /* PIL clamps, Stoke shifts */
            snprintf(rel, sizeof rel, "png/%s.%s", kinds[k], ch == 3 ? "rgb" : "l");
            size_t n;
            uint8_t *want = load(rel, &n), *px;
            uint32_t w, h;
            ck_assert_msg(stk_png_decode(png, len, ch, 0, &px, &w, &h) == STK_OK, "%s: %s",
                          kinds[k], stk_last_error());
            ck_assert_uint_eq(w, 37);
            ck_assert_uint_eq(h, 23);
            ck_assert_uint_eq(n, (size_t)w * h * (size_t)ch);
            ck_assert_msg(!memcmp(px, want, n), "%s, %d channels: not PIL's pixels", kinds[k], ch);
            free(px);
            free(want);
        }
        free(png);
    }
    struct {
        const char *file, *why;
        stk_status st;
    } bad[] = {{"png/truncated.png", "PNG: ", STK_ERR_CORRUPT},
               {"png/bad_crc.png", "PNG: ", STK_ERR_CORRUPT}, /* libpng: a bad filter or CRC */
               {"single/baseline.jpg", "not a PNG file", STK_ERR_CORRUPT}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len;
        uint8_t *data = load(bad[i].file, &len), *px = (uint8_t *)1;
        uint32_t w, h;
        ck_assert_int_eq(stk_png_decode(data, len, 3, 0, &px, &w, &h), bad[i].st);
        ck_assert_ptr_null(px);
        ck_assert_msg(strstr(stk_last_error(), bad[i].why), "%s: %s", bad[i].file,
                      stk_last_error());
        free(data);
    }
    size_t len;
    uint8_t *data = load("png/rgb8.png", &len), *px;
    uint32_t w, h;
    ck_assert_int_eq(stk_png_decode(data, len, 3, 100, &px, &w, &h), STK_ERR_LIMIT);
    ck_assert_int_eq(stk_png_decode(data, len, 2, 0, &px, &w, &h), STK_ERR_INVALID_ARG);
    free(data);
}
END_TEST

/* Every other format pack reads decodes to PIL's pixels, byte for byte:
 * WebP (lossy and lossless with alpha), BMP (24-bit, 8-bit palette, 1-bit,
 * 32-bit top-down, 16-bit 5-6-5 bit fields in v3 and v5 headers), PPM and
 * PGM, an interlaced PNG; GIF and TIFF are refused naming what is read. */
START_TEST(other_formats_decode_like_pil)
{
    static const char *files[] = {
        "lossy.webp", "rgba_lossless.webp", "rgb24.bmp",     "p8.bmp",
        "bw1.bmp",    "bgrx32_topdown.bmp", "rgb565.bmp",    "rgb565_v5.bmp",
        "rgb_p6.ppm", "gray.pgm",           "interlaced.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "formats/%s", files[i]);
        size_t len, n;
        uint8_t *data = load(rel, &len), *px;
        ck_assert(stk_image_decodable(stk_image_sniff(data, len)));
        uint32_t w, h;
        int c;
        ck_assert_msg(stk_image_decode(data, len, 0, 0, &px, &w, &h, &c) == STK_OK, "%s: %s",
                      files[i], stk_last_error());
        ck_assert_uint_eq(w, 37);
        ck_assert_uint_eq(h, 23);
        *strrchr(rel, '.') = '\0';
        strcat(rel, c == 1 ? ".l" : ".rgb");
        uint8_t *want = load(rel, &n);
        ck_assert_uint_eq(n, (size_t)w * h * (size_t)c);
        ck_assert_msg(!memcmp(px, want, n), "%s: not PIL's pixels", files[i]);
        free(px);
        /* the other channel count: PIL's convert("L") / repetition */
        ck_assert_int_eq(stk_image_decode(data, len, c == 1 ? 3 : 1, 0, &px, &w, &h, &c), STK_OK);
        ck_assert_int_eq(c, c == 1 ? 1 : 3);
        free(px);
        free(want);
        /* truncated: refused with a reason, never a crash */
        px = (uint8_t *)1;
        ck_assert_int_ne(stk_image_decode(data, len / 2, 0, 0, &px, &w, &h, &c), STK_OK);
        ck_assert_ptr_null(px);
        ck_assert_int_eq(stk_image_decode(data, len, 0, 100, &px, &w, &h, &c), STK_ERR_LIMIT);
        free(data);
    }
    static const uint8_t gif[] = "GIF89a....", text[] = "P3\n2 2\n255\n";
    uint8_t *px;
    uint32_t w, h;
    int c;
    ck_assert_int_eq(stk_image_decode(gif, sizeof gif, 0, 0, &px, &w, &h, &c), STK_ERR_UNSUPPORTED);
    ck_assert(strstr(stk_last_error(), "a GIF image: not one of JPEG, PNG, WebP, BMP, PPM/PGM"));
    ck_assert_int_eq(stk_image_decode(text, sizeof text, 0, 0, &px, &w, &h, &c),
                     STK_ERR_UNSUPPORTED);
    ck_assert(strstr(stk_last_error(), "ASCII"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("augment");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, header_kinds);
    tcase_add_test(tc, bad_inputs_are_errors_with_reasons);
    tcase_add_test(tc, validate_gives_exact_stats);
    tcase_add_test(tc, validate_stats_match_decoded_pixels);
    tcase_add_test(tc, prepare_stores_baseline_as_is);
    tcase_add_test(tc, prepare_transcodes_progressive_losslessly);
    tcase_add_test(tc, prepare_converts_cmyk_like_pil);
    tcase_add_test(tc, prepare_max_side_resizes);
    tcase_add_test(tc, resize_constant_and_antialias);
    tcase_add_test(tc, resize_window_matches_a_double_reference);
    tcase_add_test(tc, roi_decode_matches_full_decode);
    tcase_add_test(tc, restart_interval_divides_the_row);
    tcase_add_test(tc, segmented_files_keep_their_coefficients);
    tcase_add_test(tc, counted_tables_write_libjpegs_bytes);
    tcase_add_test(tc, optimal_tables_equal_libjpegs);
    tcase_add_test(tc, segment_decode_equals_the_whole_stream_decode);
    tcase_add_test(tc, damaged_segments_fail_cleanly);
    tcase_add_test(tc, damaged_segments_decode_as_libjpeg_does);
    tcase_add_test(tc, entropy_decode_equals_libjpeg);
    tcase_add_test(tc, entropy_decode_all_equals_per_segment);
    tcase_add_test(tc, roi_decode_rejects_a_wrong_size_and_bad_bounds);
    tcase_add_test(tc, scan_limit_refuses_progressive_files);
    tcase_add_test(tc, truncations_and_flips_fail_cleanly);
    tcase_add_test(tc, spec_parsing);
    tcase_add_test(tc, plan_geometry_edge_cases);
    tcase_add_test(tc, transform_fits_smallest_images);
    tcase_add_test(tc, flip_is_an_exact_mirror);
    tcase_add_test(tc, raw_images_and_edge_sizes);
    tcase_add_test(tc, output_formats_and_normalisation);
    tcase_add_test(tc, same_sample_same_bytes_other_epoch_other_crop);
    tcase_add_test(tc, resize_quality_against_float_and_pil);
    tcase_add_test(tc, half_conversion);
    tcase_add_test(tc, png_decodes_like_pil);
    tcase_add_test(tc, other_formats_decode_like_pil);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
