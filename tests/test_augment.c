/* augment/: JPEG error handling, decoder, pack-time preparation, resize. */
#include "augment/jpeg_decoder.h"
#include "augment/jpeg_prepare.h"
#include "augment/resize.h"
#include "common/fs.h"

#include "tests/check_main.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        {"bad/png_named.jpg", STK_ERR_UNSUPPORTED, "a PNG image"},
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

int main(void)
{
    Suite *s = suite_create("augment");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, header_kinds);
    tcase_add_test(tc, bad_inputs_are_errors_with_reasons);
    tcase_add_test(tc, validate_gives_exact_stats);
    tcase_add_test(tc, validate_stats_match_decoded_pixels);
    tcase_add_test(tc, prepare_stores_baseline_as_is);
    tcase_add_test(tc, prepare_transcodes_progressive_losslessly);
    tcase_add_test(tc, prepare_converts_cmyk_like_pil);
    tcase_add_test(tc, prepare_max_side_resizes);
    tcase_add_test(tc, resize_constant_and_antialias);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
