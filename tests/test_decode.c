/* decode/: JPEG header, decode (whole, scaled, region of interest), the
 * restart-marker segments and Stoke's entropy decoder of them, damaged
 * files; PNG, WebP, BMP and PPM against PIL. Also pack/jpeg_prepare (the
 * pack-time transcode whose output these decoders read), checked against
 * the decoder here. */
#include "common/fs.h"
#include "common/rng.h"
#include "decode/image_decode.h"
#include "decode/jpeg_decoder.h"
#include "decode/jpeg_entropy.h"
#include "decode/jpeg_huffman.h"
#include "decode/jpeg_segments.h"
#include "decode/png_decoder.h"
#include "pack/jpeg_prepare.h"

#include "tests/check_main.h"
#include "tests/image_fixtures.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <jpeglib.h>

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

/* ---- region-of-interest decode ---- */

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
            uint8_t *full = decode_full_rgb(dec, d, len, reg.scale, &fw, &fh);
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
 * the decode falls back). Bytes flipped, dropped and added before a marker,
 * and 0xFF fill bytes put before a stuffed zero (FF FF FF 00: one 0xFF of
 * data to libjpeg-turbo; a fuzzer found Stoke's decoder reading it as a
 * marker). */
START_TEST(damaged_segments_decode_as_libjpeg_does)
{
    size_t len;
    stk_jpeg_segments s = {0};
    stk_jpeg_info info;
    uint8_t *d = segmented_grid("single/large.jpg", 4, &len, &s, &info);
    int w = (int)info.width, h = (int)info.height;
    uint8_t *bad = malloc(len + 2), *ref = NULL;
    int same_pixels = 0, same_errors = 0, filled = 0;
    for (int edit = 0; edit < 4 * 120; edit++) {
        size_t at = s.data_at + (len - s.data_at - 2) * (size_t)(edit / 4) / 120, n = len;
        bool fill = false;
        if (edit % 4 == 3) { /* FF 00 -> FF FF FF 00 at the next stuffed zero */
            while (at + 1 < len && !(d[at] == 0xFF && d[at + 1] == 0x00)) at++;
            if (at + 1 >= len) continue;
            memcpy(bad, d, at);
            bad[at] = bad[at + 1] = 0xFF;
            memcpy(bad + at + 2, d + at, len - at);
            n = len + 2;
            fill = true;
        } else if (edit % 4 == 0) { /* a byte flipped */
            memcpy(bad, d, len);
            bad[at] ^= 0x24;
        } else if (edit % 4 == 1) { /* a byte gone */
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
        if (fill) { /* fill bytes before a stuffed zero are no damage */
            ck_assert_msg(sa == STK_OK, "edit %d at %zu: %s", edit, at, stk_last_error());
            filled++;
        }
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
    ck_assert_int_gt(filled, 20);
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
    size_t blocks_checked = 0, fill_checked = 0;
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
            /* 0xFF fill bytes before a stuffed zero (FF FF FF 00): one 0xFF of
             * data, as libjpeg-turbo reads it; the same coefficients */
            int16_t *again = malloc((size_t)s.interval * (size_t)e.blocks * 64 * sizeof *again);
            uint8_t *filled = malloc(len + 2);
            for (size_t k = 0; k < s.count; k++) {
                size_t b0, m = segment_bytes(&s, k, &b0), at = 0;
                while (at + 1 < m && !(d[b0 + at] == 0xFF && d[b0 + at + 1] == 0x00)) at++;
                if (at + 1 >= m) continue;
                memcpy(filled, d + b0, at);
                filled[at] = filled[at + 1] = 0xFF;
                memcpy(filled + at + 2, d + b0 + at, m - at);
                ck_assert_int_eq(stk_jpeg_entropy_decode(&e, d + b0, m, s.interval, coef, NULL),
                                 STK_OK);
                ck_assert_msg(
                    stk_jpeg_entropy_decode(&e, filled, m + 2, s.interval, again, NULL) == STK_OK,
                    "%s segment %zu with fill bytes: %s", seg_files[f], k, stk_last_error());
                ck_assert(!memcmp(coef, again, (size_t)s.interval * (size_t)e.blocks * 64 * 2));
                fill_checked++;
            }
            free(filled);
            free(again);
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
    ck_assert_uint_gt(fill_checked, 50);
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
    Suite *s = suite_create("decode");
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
    tcase_add_test(tc, png_decodes_like_pil);
    tcase_add_test(tc, other_formats_decode_like_pil);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
