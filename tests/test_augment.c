/* augment/: resize, transform specs, geometry, the augment pipeline (over
 * decode/'s JPEG decoder), resize quality against PIL, half floats. */
#include "augment/augment.h"
#include "augment/geometry.h"
#include "augment/resize.h"
#include "augment/transform_spec.h"
#include "common/fs.h"
#include "common/half.h"
#include "common/rng.h"
#include "decode/jpeg_decoder.h"

#include "tests/check_main.h"
#include "tests/image_fixtures.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <jpeglib.h>

static stk_jpeg_decoder *dec;

static void setup(void) { ck_assert_int_eq(stk_jpeg_decoder_create(64000000, &dec), STK_OK); }
static void teardown(void) { stk_jpeg_decoder_destroy(dec); }

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
        uint8_t *full = decode_full_rgb(dec, d, len, 8, &w, &h);
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
int main(void)
{
    Suite *s = suite_create("augment");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, resize_constant_and_antialias);
    tcase_add_test(tc, resize_window_matches_a_double_reference);
    tcase_add_test(tc, spec_parsing);
    tcase_add_test(tc, plan_geometry_edge_cases);
    tcase_add_test(tc, transform_fits_smallest_images);
    tcase_add_test(tc, flip_is_an_exact_mirror);
    tcase_add_test(tc, raw_images_and_edge_sizes);
    tcase_add_test(tc, output_formats_and_normalisation);
    tcase_add_test(tc, same_sample_same_bytes_other_epoch_other_crop);
    tcase_add_test(tc, resize_quality_against_float_and_pil);
    tcase_add_test(tc, half_conversion);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
