/* augment/pixel_ops: each deterministic op against torchvision's functional
 * op (fixtures: tests/fixtures/make_pixel_op_reference.py), the random
 * forms' distributions, the policies' op sets, the spec tokens, and the ops
 * inside stk_augment. */
#include "augment/augment.h"
#include "augment/geometry.h"
#include "augment/pixel_ops.h"
#include "augment/pixel_ops_impl.h"
#include "augment/transform_spec.h"
#include "common/rng.h"

#include "tests/check_main.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const char *data_dir(void)
{
    return getenv("STOKE_TEST_DATA") ? getenv("STOKE_TEST_DATA") : "../tests/data";
}

typedef struct image {
    char spec[128];
    int w, h, c;
    uint8_t *px;
} image;

/* The fixture's records: "SPEC W H C\n" + H*W*C bytes. */
static int read_references(image *out, int max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pixel_ops/reference.bin.gz", data_dir());
    gzFile f = gzopen(path, "rb");
    ck_assert_msg(f, "%s", path);
    int n = 0;
    char line[256];
    while (n < max && gzgets(f, line, sizeof line)) {
        image *im = &out[n];
        ck_assert_int_eq(sscanf(line, "%127s %d %d %d", im->spec, &im->w, &im->h, &im->c), 4);
        size_t bytes = (size_t)im->w * im->h * im->c;
        im->px = malloc(bytes);
        ck_assert_int_eq(gzread(f, im->px, (unsigned)bytes), (int)bytes);
        n++;
    }
    gzclose(f);
    return n;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) se += (double)(a[i] - b[i]) * (a[i] - b[i]);
    if (se == 0) return INFINITY;
    return 10 * log10(255.0 * 255.0 / (se / (double)n));
}

/* Apply spec's (deterministic) ops to a copy of in, all at once (runs of
 * colour ops fused, as the loader does); the same bytes as one op at a time. */
static uint8_t *run_spec(const char *spec, const image *in)
{
    stk_transform t;
    ck_assert_msg(stk_transform_parse(spec, &t) == STK_OK, "%s: %s", spec, stk_last_error());
    ck_assert(!stk_transform_is_random(&t));
    size_t bytes = (size_t)in->w * in->h * in->c, stride = (size_t)in->w * in->c;
    uint8_t *px = malloc(bytes), *one = malloc(bytes);
    memcpy(px, in->px, bytes);
    memcpy(one, in->px, bytes);
    stk_pixel_scratch s = {0};
    ck_assert_msg(stk_pixel_ops_apply(t.ops, t.n_ops, px, stride, in->w, in->h, in->c, &s) ==
                      STK_OK,
                  "%s: %s", spec, stk_last_error());
    for (int i = 0; i < t.n_ops; i++)
        ck_assert_msg(stk_pixel_op_apply(&t.ops[i], one, stride, in->w, in->h, in->c, &s) == STK_OK,
                      "%s: %s", spec, stk_last_error());
    ck_assert_msg(memcmp(px, one, bytes) == 0, "%s: fused and one by one differ", spec);
    stk_pixel_scratch_deinit(&s);
    free(one);
    return px;
}

START_TEST(deterministic_ops_match_torchvision)
{
    image refs[64];
    int n = read_references(refs, 64);
    ck_assert_int_ge(n, 40);
    ck_assert_str_eq(refs[0].spec, "input");
    ck_assert_str_eq(refs[1].spec, "input-gray");
    for (int i = 2; i < n; i++) {
        const image *in = refs[i].c == 3 ? &refs[0] : &refs[1];
        uint8_t *px = run_spec(refs[i].spec, in);
        size_t bytes = (size_t)in->w * in->h * in->c, same = 0;
        for (size_t k = 0; k < bytes; k++) same += px[k] == refs[i].px[k];
        double q = psnr(px, refs[i].px, bytes);
        printf("%-40s %d ch: %6.1f dB, %5.1f%% of bytes equal\n", refs[i].spec, in->c, q,
               100.0 * (double)same / (double)bytes);
        ck_assert_msg(q >= 40, "%s (%d channels): %.1f dB against torchvision", refs[i].spec, in->c,
                      q);
        free(px);
    }
    for (int i = 0; i < n; i++) free(refs[i].px);
}
END_TEST

/* With AVX-512 VBMI the byte-mapping colour ops become byte tables folded
 * into the float passes (augment/pixel_color.c): the same bytes as the
 * float path every CPU can take, for every order of colorjitter's four ops
 * (contrast first, between, last; twice) and the other pointwise ops, on
 * the whole photo and on rows with a gap after them (which take the row
 * by row path). On a CPU without VBMI both runs take the float path. */
START_TEST(byte_tables_equal_the_float_path)
{
    image refs[64];
    int n = read_references(refs, 64);
    const image *in = &refs[0];
    const char *op[4] = {"brightness:1.3", "contrast:0.6", "saturation:1.4", "hue:-0.07"};
    char specs[40][160];
    int count = 0;
    for (int a = 0; a < 4; a++) /* the 24 orders of colorjitter's ops */
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                int d = 6 - a - b - c;
                if (a == b || a == c || b == c || d < 0 || d > 3 || d == a || d == b || d == c)
                    continue;
                snprintf(specs[count++], sizeof specs[0], "%s,%s,%s,%s", op[a], op[b], op[c],
                         op[d]);
            }
    const char *more[] = {"contrast:1.7",
                          "brightness:0.5,contrast:1.4,contrast:0.7",
                          "invert,saturation:0.3,posterize:3,solarize:100",
                          "contrast:1.2,grayscale,brightness:1.5,contrast:0.8,invert",
                          "hue:0.2,contrast:0.9,saturation:1.6,brightness:0.7,posterize:5",
                          "saturation:0.5"};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        snprintf(specs[count++], 160, "%s", more[i]);
    int w = in->w, h = in->h, gap = 5;
    size_t stride = (size_t)w * 3 + (size_t)gap, bytes = stride * (size_t)h;
    uint8_t *px[2], *rows[2];
    stk_pixel_scratch s = {0};
    for (int i = 0; i < count; i++) {
        stk_transform t;
        ck_assert_msg(stk_transform_parse(specs[i], &t) == STK_OK, "%s", stk_last_error());
        for (int path = 0; path < 2; path++) {
            stk_pixel_vbmi_allow(path == 0);
            px[path] = malloc((size_t)w * h * 3), rows[path] = calloc(1, bytes);
            memcpy(px[path], in->px, (size_t)w * h * 3);
            for (int y = 0; y < h; y++)
                memcpy(rows[path] + (size_t)y * stride, in->px + (size_t)y * w * 3, (size_t)w * 3);
            ck_assert(stk_pixel_ops_apply(t.ops, t.n_ops, px[path], (size_t)w * 3, w, h, 3, &s) ==
                      STK_OK);
            ck_assert(stk_pixel_ops_apply(t.ops, t.n_ops, rows[path], stride, w, h, 3, &s) ==
                      STK_OK);
        }
        stk_pixel_vbmi_allow(true);
        ck_assert_msg(memcmp(px[0], px[1], (size_t)w * h * 3) == 0, "%s: tables and floats differ",
                      specs[i]);
        for (int y = 0; y < h; y++)
            ck_assert_msg(
                memcmp(rows[0] + (size_t)y * stride, px[0] + (size_t)y * w * 3, (size_t)w * 3) == 0,
                "%s: row %d with a gap after it differs", specs[i], y);
        for (size_t k = 0; k < bytes; k++)
            ck_assert_msg(k % stride < (size_t)w * 3 || rows[0][k] == 0, "%s: a gap was written",
                          specs[i]);
        for (int path = 0; path < 2; path++) free(px[path]), free(rows[path]);
    }
    stk_pixel_scratch_deinit(&s);
    for (int i = 0; i < n; i++) free(refs[i].px);
}
END_TEST

START_TEST(policies_match_torchvision)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pixel_ops/policies.txt", data_dir());
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "%s", path);
    char line[8192];
    int w = 0, h = 0, seen[2] = {0, 0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            ck_assert(sscanf(strstr(line, "image ") + 6, "%dx%d", &w, &h) == 2);
            continue;
        }
        char policy[32], name[32];
        int bins, is_signed, used;
        ck_assert_int_eq(sscanf(line, "%31s %d %31s %d%n", policy, &bins, name, &is_signed, &used),
                         4);
        int p = strcmp(policy, "trivialaugment") == 0;
        stk_pixel_op_kind kind = p ? STK_OP_TRIVIALAUGMENT : STK_OP_RANDAUGMENT;
        int index = seen[p]++;
        ck_assert_str_eq(stk_pixel_policy_op_name(index), name); /* same set, same order */
        char *s = line + used;
        for (int bin = 0; bin < bins; bin++) {
            char *end;
            double want = strtod(s, &end);
            ck_assert(end != s);
            s = end;
            double got = stk_pixel_policy_magnitude(kind, index, bin, bins, w, h);
            ck_assert_msg(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)),
                          "%s %s bin %d: %g, not %g", policy, name, bin, got, want);
        }
    }
    fclose(f);
    ck_assert_int_eq(seen[0], stk_pixel_policy_op_count());
    ck_assert_int_eq(seen[1], stk_pixel_policy_op_count());
}
END_TEST

/* Draw spec's ops n times (a fresh sample each time). */
static int draw(const char *spec, int sample, stk_pixel_op *out)
{
    stk_transform t;
    ck_assert_msg(stk_transform_parse(spec, &t) == STK_OK, "%s: %s", spec, stk_last_error());
    stk_rng r;
    stk_rng_for_sample_ops(&r, 7, 0, (uint64_t)sample);
    return stk_pixel_ops_draw(t.ops, t.n_ops, &r, 96, 72, out);
}

START_TEST(colorjitter_draws_like_torchvision)
{
    enum { N = 24000 };
    int orders[24] = {0};
    double lo[4] = {9, 9, 9, 9}, hi[4] = {-9, -9, -9, -9}, sum[4] = {0};
    stk_pixel_op d[STK_PIXEL_MAX_DRAWN];
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(draw("colorjitter:0.4:0.3:1.5:0.1", i, d), 4);
        int code = 0, used = 0;
        for (int k = 0; k < 4; k++) {
            int which = (int)d[k].kind - STK_OP_BRIGHTNESS;
            ck_assert(which >= 0 && which < 4 && !(used >> which & 1));
            used |= 1 << which;
            double v = d[k].arg[0];
            lo[which] = fmin(lo[which], v), hi[which] = fmax(hi[which], v), sum[which] += v;
            /* the permutation's rank in factorial base */
            int smaller = 0;
            for (int j = k + 1; j < 4; j++) smaller += (int)d[j].kind - STK_OP_BRIGHTNESS < which;
            code = code * (4 - k) + smaller;
        }
        orders[code]++;
    }
    /* ranges: brightness U(0.6, 1.4), contrast U(0.7, 1.3), saturation U(0, 2.5) (max(0,
     * 1 - 1.5)), hue U(-0.1, 0.1); means at the middle within 4 standard errors */
    const double want_lo[4] = {0.6, 0.7, 0.0, -0.1}, want_hi[4] = {1.4, 1.3, 2.5, 0.1};
    for (int k = 0; k < 4; k++) {
        double width = want_hi[k] - want_lo[k], se = width / sqrt(12.0 * N);
        ck_assert(lo[k] >= want_lo[k] && lo[k] < want_lo[k] + width * 0.01);
        ck_assert(hi[k] < want_hi[k] && hi[k] > want_hi[k] - width * 0.01);
        ck_assert_msg(fabs(sum[k] / N - (want_lo[k] + want_hi[k]) / 2) < 4 * se,
                      "factor %d mean %g", k, sum[k] / N);
    }
    for (int o = 0; o < 24; o++) /* 1000 expected each; 4 sigma ~ 125 */
        ck_assert_msg(abs(orders[o] - N / 24) < 130, "order %d drawn %d times", o, orders[o]);
    /* a zero argument is torchvision's None: not applied */
    ck_assert_int_eq(draw("colorjitter:0.4", 1, d), 1);
    ck_assert_int_eq(d[0].kind, STK_OP_BRIGHTNESS);
    ck_assert_int_eq(draw("colorjitter:0:0:0.2", 1, d), 1);
    ck_assert_int_eq(d[0].kind, STK_OP_SATURATION);
}
END_TEST

START_TEST(random_classes_draw_like_torchvision)
{
    enum { N = 20000 };
    stk_pixel_op d[STK_PIXEL_MAX_DRAWN];
    int taken[4] = {0};
    double angle_sum = 0, angle_min = 999, angle_max = -999, sigma_min = 99, sigma_max = 0;
    int tx_max = 0, tx_min = 0;
    for (int i = 0; i < N; i++) {
        taken[0] += draw("randomgrayscale", i, d);
        taken[1] += draw("randomposterize:3", i, d);
        taken[2] += draw("randomsolarize:100:0.25", i, d);
        ck_assert_int_eq(draw("randomrotation:20", i, d), 1);
        ck_assert_int_eq(d[0].kind, STK_OP_ROTATE);
        angle_sum += d[0].arg[0];
        angle_min = fmin(angle_min, d[0].arg[0]), angle_max = fmax(angle_max, d[0].arg[0]);
        ck_assert_int_eq(draw("randomaffine:0:0.1:0.2:0.9:1.1:5", i, d), 1);
        ck_assert_int_eq(d[0].kind, STK_OP_AFFINE);
        ck_assert(d[0].arg[1] == floor(d[0].arg[1]) && fabs(d[0].arg[1]) <= 10);
        ck_assert(d[0].arg[2] == floor(d[0].arg[2]) && fabs(d[0].arg[2]) <= 14);
        ck_assert(d[0].arg[3] >= 0.9 && d[0].arg[3] < 1.1 && fabs(d[0].arg[4]) <= 5);
        tx_max = d[0].arg[1] > tx_max ? (int)d[0].arg[1] : tx_max;
        tx_min = d[0].arg[1] < tx_min ? (int)d[0].arg[1] : tx_min;
        ck_assert_int_eq(draw("gaussianblur:5:0.5:1.5", i, d), 1);
        sigma_min = fmin(sigma_min, d[0].arg[1]), sigma_max = fmax(sigma_max, d[0].arg[1]);
    }
    /* p = 0.1, 0.5, 0.25: within 4 standard errors */
    const double p[3] = {0.1, 0.5, 0.25};
    for (int k = 0; k < 3; k++)
        ck_assert_msg(fabs((double)taken[k] / N - p[k]) < 4 * sqrt(p[k] * (1 - p[k]) / N),
                      "class %d taken %d of %d", k, taken[k], N);
    ck_assert(angle_min >= -20 && angle_min < -19.9 && angle_max < 20 && angle_max > 19.9);
    ck_assert(fabs(angle_sum / N) < 4 * 40 / sqrt(12.0 * N));
    ck_assert(tx_max == 10 && tx_min == -10); /* round(U(-9.6, 9.6)) */
    ck_assert(sigma_min >= 0.5 && sigma_max < 1.5 && sigma_max > 1.49);
}
END_TEST

START_TEST(policies_draw_like_torchvision)
{
    enum { N = 28000 };
    stk_pixel_op d[STK_PIXEL_MAX_DRAWN];
    int kinds[STK_OP_DETERMINISTIC_END] = {0}, none = 0, negative = 0, rotations = 0;
    for (int i = 0; i < N; i++) {
        int n = draw("randaugment:2:9", i, d);
        ck_assert(n <= 2);
        none += 2 - n; /* Identity */
        for (int k = 0; k < n; k++) {
            kinds[d[k].kind]++;
            if (d[k].kind == STK_OP_ROTATE) {
                ck_assert(fabs(fabs(d[k].arg[0]) - 9.0) < 1e-5); /* linspace(0, 30, 31)[9] */
                negative += d[k].arg[0] < 0, rotations++;
            }
        }
    }
    /* 14 ops, each 2N/14 = 4000 times; 4 sigma ~ 250. Color -> saturation,
     * Brightness -> brightness, ... one kind per op. */
    ck_assert_msg(abs(none - 2 * N / 14) < 260, "identity %d", none);
    const stk_pixel_op_kind used[] = {STK_OP_SHEARX,     STK_OP_SHEARY,   STK_OP_TRANSLATEX,
                                      STK_OP_TRANSLATEY, STK_OP_ROTATE,   STK_OP_BRIGHTNESS,
                                      STK_OP_SATURATION, STK_OP_CONTRAST, STK_OP_SHARPNESS,
                                      STK_OP_POSTERIZE,  STK_OP_SOLARIZE, STK_OP_AUTOCONTRAST,
                                      STK_OP_EQUALIZE};
    for (size_t k = 0; k < sizeof used / sizeof used[0]; k++)
        ck_assert_msg(abs(kinds[used[k]] - 2 * N / 14) < 260, "%s drawn %d times",
                      stk_pixel_op_name(used[k]), kinds[used[k]]);
    ck_assert(fabs((double)negative / rotations - 0.5) < 4 * 0.5 / sqrt(rotations));
    /* TrivialAugmentWide: one op, its bin uniform over 31 */
    int bins[31] = {0}, draws = 0;
    for (int i = 0; i < N * 2; i++) {
        int n = draw("trivialaugment", i, d);
        ck_assert(n <= 1);
        if (n == 1 && d[0].kind == STK_OP_ROTATE) {
            int bin = (int)lround(fabs(d[0].arg[0]) / 4.5); /* linspace(0, 135, 31) */
            ck_assert(bin >= 0 && bin < 31 && fabs(fabs(d[0].arg[0]) - bin * 4.5) < 1e-4);
            bins[bin]++, draws++;
        }
    }
    for (int b = 0; b < 31; b++)
        ck_assert_msg(abs(bins[b] - draws / 31) < 4 * sqrt(draws / 31.0) + 2, "bin %d: %d of %d", b,
                      bins[b], draws);
}
END_TEST

START_TEST(pixel_op_tokens_parse_and_format)
{
    static const char *good[] = {
        "rrc:224,flip,colorjitter:0.4:0.4:0.4:0.1",
        "center:32,brightness:1.3,hue:-0.05,rotate:15,affine:10:5:-3:1.1:8",
        "crop:28,randomrotation:-5:10,randomaffine:10:0.1:0.1:0.9:1.1:5,gaussianblur:3:0.5",
        "rrc:64,randaugment,trivialaugment:15,randomgrayscale:0.2,randomsolarize:128",
        "rrc:64,randomaffine:10:0:0:0.8:1,gaussianblur:5:0.3:0.9,blur:3,posterize:0",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        stk_transform t, u;
        ck_assert_msg(stk_transform_parse(good[i], &t) == STK_OK, "%s: %s", good[i],
                      stk_last_error());
        char text[1024], again[1024];
        stk_transform_format(&t, text, sizeof text);
        ck_assert_msg(stk_transform_parse(text, &u) == STK_OK, "%s -> %s: %s", good[i], text,
                      stk_last_error());
        stk_transform_format(&u, again, sizeof again);
        ck_assert_str_eq(text, again);
        ck_assert_int_eq(t.n_ops, u.n_ops);
        for (int k = 0; k < t.n_ops; k++)
            ck_assert_msg(memcmp(&t.ops[k], &u.ops[k], sizeof t.ops[k]) == 0, "%s op %d", text, k);
    }
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"colorjitter", "expected colorjitter:BRIGHTNESS"},
        {"colorjitter:0.4:0.4:0.4:0.6", "hue 0..0.5"},
        {"hue:0.7", "-0.5..0.5"},
        {"brightness:-1", ">= 0"},
        {"posterize:9", "0..8"},
        {"posterize:3.5", "0..8"},
        {"blur:4", "odd kernel"},
        {"gaussianblur:3:2:1", "SIGMA_MIN"},
        {"randomaffine:10:0.1", "TRANSLATE_X:TRANSLATE_Y"},
        {"randaugment:2:31", "magnitude below bins"},
        {"rotate:15:3", "rotate:DEGREES"},
        {"affine:1:2:3:4:5:6:7:8:9", "affine:ANGLE"},
        {"colourjitter:0.4", "unknown transform (did you mean colorjitter?"},
        {"none,invert", "none takes no other"},
        {"center:8,blur:17", "a blur kernel of 17"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stk_transform t;
        ck_assert_msg(stk_transform_parse(bad[i].spec, &t) == STK_ERR_INVALID_ARG, "%s",
                      bad[i].spec);
        ck_assert_msg(strstr(stk_last_error(), bad[i].why), "%s: %s", bad[i].spec,
                      stk_last_error());
        ck_assert_msg(strstr(stk_last_error(), bad[i].spec) ||
                          i == sizeof bad / sizeof bad[0] - 2 ||
                          i == sizeof bad / sizeof bad[0] - 1,
                      "%s: %s", bad[i].spec, stk_last_error());
    }
}
END_TEST

/* A raw 40x30 RGB gradient with texture, as a stk_sample. */
static uint8_t raw[40 * 30 * 3];
static stk_sample raw_sample(void)
{
    for (int i = 0; i < 40 * 30 * 3; i++) raw[i] = (uint8_t)((i * 37) ^ (i / 120 * 11));
    return (stk_sample){
        .encoding = 2, .data = raw, .len = sizeof raw, .width = 40, .height = 30, .channels = 3};
}

static void augment_once(const char *spec, stk_pixel_format format, uint64_t index, void *out,
                         size_t stride, size_t cap)
{
    stk_augment_options o = {.spec = spec, .format = format, .channels = 3, .seed = 3};
    stk_augment *a;
    ck_assert_msg(stk_augment_create(&o, &a) == STK_OK, "%s: %s", spec, stk_last_error());
    stk_sample s = raw_sample();
    stk_augment_out res = {out, stride, cap, 0, 0, 0, 0};
    ck_assert_msg(stk_augment_apply(a, &s, 1, index, &res) == STK_OK, "%s: %s", spec,
                  stk_last_error());
    stk_augment_destroy(a);
}

START_TEST(augment_runs_the_ops_after_the_crop)
{
    uint8_t plain[24 * 24 * 3], same[24 * 24 * 3], ops[24 * 24 * 3], again[24 * 24 * 3];
    for (uint64_t index = 0; index < 20; index++) {
        /* an identity op leaves the crop as it was: the ops draw from their own stream */
        augment_once("rrc:24,flip", STK_PIXELS_U8_HWC, index, plain, 72, sizeof plain);
        augment_once("rrc:24,flip,brightness:1", STK_PIXELS_U8_HWC, index, same, 72, sizeof same);
        ck_assert(memcmp(plain, same, sizeof plain) == 0);
        /* the ops: as applied by hand to the crop; and the same bytes twice */
        augment_once("rrc:24,flip,invert,solarize:100", STK_PIXELS_U8_HWC, index, ops, 72,
                     sizeof ops);
        for (size_t k = 0; k < sizeof plain; k++) {
            int v = 255 - plain[k];
            ck_assert_int_eq(ops[k], v >= 100 ? 255 - v : v);
        }
        augment_once("rrc:24,flip,trivialaugment,colorjitter:0.4:0.4:0.4:0.1", STK_PIXELS_U8_HWC,
                     index, ops, 72, sizeof ops);
        augment_once("rrc:24,flip,trivialaugment,colorjitter:0.4:0.4:0.4:0.1", STK_PIXELS_U8_HWC,
                     index, again, 72, sizeof again);
        ck_assert(memcmp(ops, again, sizeof ops) == 0);
        /* float outputs: the u8 result of the ops, scaled */
        float f[3 * 24 * 24];
        augment_once("rrc:24,flip,trivialaugment,colorjitter:0.4:0.4:0.4:0.1", STK_PIXELS_F32_CHW,
                     index, f, 24 * 4, sizeof f);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < 24 * 24; p++)
                ck_assert_float_eq_tol(f[c * 576 + p], ops[p * 3 + c] / 255.0f, 1e-6);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pixel_ops");
    TCase *tc = tcase_create("all");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, deterministic_ops_match_torchvision);
    tcase_add_test(tc, byte_tables_equal_the_float_path);
    tcase_add_test(tc, policies_match_torchvision);
    tcase_add_test(tc, colorjitter_draws_like_torchvision);
    tcase_add_test(tc, random_classes_draw_like_torchvision);
    tcase_add_test(tc, policies_draw_like_torchvision);
    tcase_add_test(tc, pixel_op_tokens_parse_and_format);
    tcase_add_test(tc, augment_runs_the_ops_after_the_crop);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
