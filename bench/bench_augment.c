/* Microbenchmark of the per-image work, one core, records preloaded in memory:
 *   (a) libjpeg-turbo alone: tjDecompress2 of the full image into RGB (the reference)
 *   (b) Stoke's full-size decode (stk_jpeg_decoder_pixels)
 *   (c) Stoke's ROI + DCT-scaled decode for RandomResizedCrop(224) (decode only)
 *   (d) the whole train transform rrc:224,flip into u8 HWC (fast decode, the
 *       loader's default for training; (D) the same with the accurate decode)
 *   (e) the eval transform resize:256,center:224 into u8 HWC
 *   (f) the entropy decode alone (Huffman to DCT coefficients) of every
 *       restart segment, libjpeg-turbo's (jpeg_read_coefficients) against
 *       Stoke's (decode/jpeg_entropy.c), in MB of entropy-coded data and
 *       million symbols per second (a set packed with --restart); then
 *       Stoke's all at once (stk_jpeg_entropy_decode_all: AVX-512 lanes)
 *   (g) (c) in fast mode with libjpeg-turbo's entropy decoder against
 *       Stoke's (jpeg_entropy_hook.h), 64 images of each in turn
 *   (h) Stoke's entropy decode loop alone, the best of 15 passes over the
 *       segments of 40 images, in ns a symbol (steady enough to compare
 *       builds of the loop on a noisy machine)
 * Each is reported in images/s and as a ratio to (a).
 *
 *   bench_augment DATA.stoke [--seconds S] [--only LETTERS]   (e.g. --only ad)
 */
#include "augment/augment.h"
#include "augment/geometry.h"
#include "common/clock.h"
#include "decode/jpeg_decoder.h"
#include "decode/jpeg_entropy.h"
#include "decode/jpeg_segments.h"
#include "storage/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <turbojpeg.h>

typedef struct item {
    uint8_t *data;
    size_t len;
    uint32_t w, h;
} item;

static item *items;
static size_t n_items;
static double min_seconds = 3.0;
static const char *only; /* run only the lines whose letter is in this string */
static uint8_t *rgb;

typedef int (*bench_fn)(void *ctx, size_t i);
static double last_rate_a; /* paired(): the first variant's images/s */

/* Run fn over the images (repeating the set) for at least min_seconds. */
static double run(const char *name, bench_fn fn, void *ctx, double ref)
{
    if (only && !strchr(only, name[1])) return 0; /* skipped: no ratios to it */
    fn(ctx, 0);                                   /* warm up scratch buffers */
    size_t done = 0;
    double t0 = stk_clock_sec(), t;
    do {
        for (size_t i = 0; i < n_items; i++, done++)
            if (fn(ctx, i)) {
                fprintf(stderr, "%s: image %zu failed: %s\n", name, i, stk_last_error());
                exit(1);
            }
        t = stk_clock_sec() - t0;
    } while (t < min_seconds);
    double rate = (double)done / t;
    printf("%-46s %8.1f images/s", name, rate);
    if (ref > 0) printf("   %.2fx (a)", rate / ref);
    printf("\n");
    return rate;
}

/* Two variants of one job, 64 images of one and the same 64 of the other
 * in turn, until both ran min_seconds: this VM's clock drifts by 10-30%
 * within seconds, and alternating finely puts both under the same drift.
 * Returns b's rate / a's. */
static double paired(const char *name_a, bench_fn a, void *ctx_a, const char *name_b, bench_fn b,
                     void *ctx_b)
{
    if (only && !strchr(only, name_a[1])) return 0;
    a(ctx_a, 0);
    b(ctx_b, 0);
    double t[2] = {0, 0};
    size_t done = 0, at = 0;
    do {
        size_t n = n_items - at < 64 ? n_items - at : 64;
        for (int k = 0; k < 2; k++) {
            double t0 = stk_clock_sec();
            for (size_t i = at; i < at + n; i++)
                if ((k ? b : a)(k ? ctx_b : ctx_a, i)) {
                    fprintf(stderr, "%s: image %zu failed: %s\n", k ? name_b : name_a, i,
                            stk_last_error());
                    exit(1);
                }
            t[k] += stk_clock_sec() - t0;
        }
        done += n;
        at = (at + n) % n_items;
    } while (t[0] < min_seconds || t[1] < min_seconds || at != 0);
    double ra = (double)done / t[0], rb = (double)done / t[1];
    last_rate_a = ra;
    printf("%-46s %8.1f images/s\n%-46s %8.1f images/s   %.2fx the line above (alternating)\n",
           name_a, ra, name_b, rb, rb / ra);
    return rb / ra;
}

static int tj_full(void *ctx, size_t i)
{
    tjhandle tj = ctx;
    int w, h, sub, cs;
    if (tjDecompressHeader3(tj, items[i].data, (unsigned long)items[i].len, &w, &h, &sub, &cs))
        return -1;
    return tjDecompress2(tj, items[i].data, (unsigned long)items[i].len, rgb, w, 0, h, TJPF_RGB, 0);
}

static int stk_full(void *ctx, size_t i)
{
    const uint8_t *px;
    uint32_t w, h;
    int c;
    return stk_jpeg_decoder_pixels(ctx, items[i].data, items[i].len, 8, &px, &w, &h, &c);
}

typedef struct roi_ctx {
    stk_jpeg_decoder *dec;
    stk_transform t;
} roi_ctx;

static int stk_roi(void *p, size_t i)
{
    roi_ctx *c = p;
    stk_sample_plan plan;
    if (stk_plan_sample(&c->t, items[i].w, items[i].h, 1, 0, i, &plan)) return -1;
    stk_jpeg_region r;
    return stk_jpeg_decoder_region(c->dec, items[i].data, items[i].len, plan.bx0, plan.by0,
                                   plan.bx1, plan.by1, plan.w, plan.h, plan.out_w, plan.out_h, 3,
                                   items[i].w, items[i].h, &r);
}

static int stk_transform_one(void *p, size_t i)
{
    stk_sample s = {1, items[i].data, items[i].len, items[i].w, items[i].h, 3};
    stk_augment_out out = {rgb, 224 * 3, 224 * 224 * 3, 0, 0, 0};
    return stk_augment_apply(p, &s, 0, i, &out);
}

/* ---- (f): the entropy decode alone ---- */

typedef struct entropy_ctx {
    stk_jpeg_segments seg;
    int16_t *coef;
    size_t coef_cap;
    int64_t symbols, bytes;       /* per pass over the set, counted by Stoke's decoder */
    bool count;                   /* count the symbols (a slower decode: not while timed) */
    stk_jpeg_segment_bytes *segs; /* all_coefficients: the image's segments */
    size_t segs_cap;
    int16_t *all;
    size_t all_cap;
    stk_jpeg_entropy_scratch scratch;
} entropy_ctx;

static int libjpeg_coefficients(void *p, size_t i)
{
    (void)p;
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr e;
    d.err = jpeg_std_error(&e);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, items[i].data, (unsigned long)items[i].len);
    jpeg_read_header(&d, TRUE);
    int bad = jpeg_read_coefficients(&d) == NULL;
    jpeg_destroy_decompress(&d);
    return bad;
}

static int stoke_coefficients(void *p, size_t i)
{
    entropy_ctx *c = p;
    stk_jpeg_entropy e;
    if (stk_jpeg_segments_parse(items[i].data, items[i].len, &c->seg) != STK_OK)
        return 0; /* no restart grid: nothing of Stoke's to time */
    if (stk_jpeg_entropy_init(items[i].data, items[i].len, &e) != STK_OK) return -1;
    size_t need = (size_t)c->seg.interval * (size_t)e.blocks * 64;
    if (need > c->coef_cap) {
        free(c->coef);
        c->coef = malloc(need * sizeof *c->coef);
        c->coef_cap = need;
    }
    for (size_t k = 0; k < c->seg.count; k++) {
        size_t begin = k ? c->seg.end[k - 1] + 2 : c->seg.data_at;
        int64_t n = 0;
        if (stk_jpeg_entropy_decode(&e, items[i].data + begin, c->seg.end[k] - begin,
                                    c->seg.interval, c->coef, c->count ? &n : NULL) != STK_OK)
            return -1;
        c->symbols += n;
        c->bytes += (int64_t)(c->seg.end[k] - begin);
    }
    return 0;
}

/* Every segment of image i at once: stk_jpeg_entropy_decode_all (16 at a
 * time on AVX-512), as the crop decode runs it. */
static int all_coefficients(void *p, size_t i)
{
    entropy_ctx *c = p;
    stk_jpeg_entropy e;
    if (stk_jpeg_segments_parse(items[i].data, items[i].len, &c->seg) != STK_OK) return 0;
    if (stk_jpeg_entropy_init(items[i].data, items[i].len, &e) != STK_OK) return -1;
    size_t n = c->seg.count, need = n * (size_t)c->seg.interval * (size_t)e.blocks * 64;
    if (n > c->segs_cap) {
        free(c->segs);
        c->segs = malloc(n * sizeof *c->segs);
        c->segs_cap = n;
    }
    if (need > c->all_cap) {
        free(c->all);
        c->all = malloc(need * sizeof *c->all);
        c->all_cap = need;
    }
    for (size_t k = 0; k < n; k++) {
        size_t begin = k ? c->seg.end[k - 1] + 2 : c->seg.data_at;
        c->segs[k] = (stk_jpeg_segment_bytes){items[i].data + begin, c->seg.end[k] - begin};
    }
    return stk_jpeg_entropy_decode_all(&e, c->segs, n, c->seg.interval, c->all, &c->scratch) !=
           STK_OK;
}

/* Both decoders over the set; the rates in MB and symbols (Stoke's counts,
 * the same stream for both) per second. */
static void entropy_lines(void)
{
    if (only && !strchr(only, 'f')) return;
    entropy_ctx c = {.count = true};
    for (size_t i = 0; i < n_items; i++) stoke_coefficients(&c, i);
    c.count = false;
    int64_t symbols = c.symbols, bytes = c.bytes;
    if (!bytes) {
        printf("(f) entropy decode: no restart segments in this set (pack it with --restart)\n");
        return;
    }
    double t = paired("(f) libjpeg-turbo entropy decode (coefficients)", libjpeg_coefficients, NULL,
                      "(f) stoke entropy decode of the segments", stoke_coefficients, &c);
    double rl = last_rate_a * (double)bytes / (double)n_items, rs = rl * t;
    double per_byte = (double)symbols / (double)bytes;
    printf("(f) entropy decode: libjpeg-turbo %.1f MB/s %.1f Msymbols/s, stoke %.1f MB/s %.1f "
           "Msymbols/s: %.2fx\n",
           rl / 1e6, rl * per_byte / 1e6, rs / 1e6, rs * per_byte / 1e6, rs / rl);
    t = paired("(f) libjpeg-turbo entropy decode (coefficients)", libjpeg_coefficients, NULL,
               stk_jpeg_entropy_vector() ? "(f) stoke, all segments at once (AVX-512)"
                                         : "(f) stoke, all segments at once (no AVX-512: scalar)",
               all_coefficients, &c);
    rl = last_rate_a * (double)bytes / (double)n_items, rs = rl * t;
    printf("(f) all at once: libjpeg-turbo %.1f MB/s %.1f Msymbols/s, stoke %.1f MB/s %.1f "
           "Msymbols/s: %.2fx\n",
           rl / 1e6, rl * per_byte / 1e6, rs / 1e6, rs * per_byte / 1e6, rs / rl);
    stk_jpeg_segments_free(&c.seg);
    stk_jpeg_entropy_scratch_free(&c.scratch);
    free(c.coef);
    free(c.segs);
    free(c.all);
}

/* (h): Stoke's loop alone, for comparing builds of it: the segments of the
 * first 40 images (their grids and tables made beforehand, all in cache)
 * decoded 15 times, the fastest pass reported. Whole runs on this kind of
 * VM drift by 10-30%; the best of 15 short passes repeats to ~1%. */
static void loop_line(void)
{
    if (only && !strchr(only, 'h')) return;
    enum { N = 40, PASSES = 15 };
    size_t n = n_items < N ? n_items : N, used = 0, at[N];
    stk_jpeg_segments seg[N];
    stk_jpeg_entropy *e = calloc(N, sizeof *e);
    int16_t *coef = NULL;
    size_t cap = 0;
    int64_t symbols = 0;
    memset(seg, 0, sizeof seg);
    for (size_t i = 0; i < n; i++) {
        if (stk_jpeg_segments_parse(items[i].data, items[i].len, &seg[used]) != STK_OK ||
            stk_jpeg_entropy_init(items[i].data, items[i].len, &e[used]) != STK_OK)
            continue;
        size_t need = (size_t)seg[used].interval * (size_t)e[used].blocks * 64;
        if (need > cap) {
            free(coef);
            coef = malloc(need * sizeof *coef);
            cap = need;
        }
        for (size_t k = 0; k < seg[used].count; k++) {
            size_t b = k ? seg[used].end[k - 1] + 2 : seg[used].data_at;
            int64_t c = 0;
            stk_jpeg_entropy_decode(&e[used], items[i].data + b, seg[used].end[k] - b,
                                    seg[used].interval, coef, &c);
            symbols += c;
        }
        at[used++] = i; /* an image with a grid */
    }
    double best = 1e30;
    for (int pass = 0; used && pass < PASSES; pass++) {
        double t0 = stk_clock_sec();
        for (size_t i = 0; i < used; i++)
            for (size_t k = 0; k < seg[i].count; k++) {
                size_t b = k ? seg[i].end[k - 1] + 2 : seg[i].data_at;
                stk_jpeg_entropy_decode(&e[i], items[at[i]].data + b, seg[i].end[k] - b,
                                        seg[i].interval, coef, NULL);
            }
        double t = stk_clock_sec() - t0;
        if (t < best) best = t;
    }
    if (used)
        printf("(h) stoke entropy decode loop, best of %d passes over %zu images: %.2f ns a "
               "symbol (%.1f Msymbols/s)\n",
               PASSES, used, best * 1e9 / (double)symbols, (double)symbols / best / 1e6);
    for (size_t i = 0; i < N; i++) stk_jpeg_segments_free(&seg[i]);
    free(coef);
    free(e);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_augment DATA.stoke [--seconds S]\n");
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) min_seconds = atof(argv[i + 1]);
        if (strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    }
    stk_dataset *ds;
    if (stk_dataset_open(argv[1], &ds)) {
        fprintf(stderr, "%s\n", stk_last_error());
        return 1;
    }
    const stk_meta *m = stk_dataset_meta(ds);
    if (m->encoding != STK_ENCODING_JPEG) {
        fprintf(stderr, "%s: a JPEG dataset is needed\n", argv[1]);
        return 1;
    }
    n_items = m->count;
    items = calloc(n_items, sizeof *items);
    size_t bytes = 0;
    uint32_t max_w = 0, max_h = 0;
    for (size_t i = 0; i < n_items; i++) {
        stk_record r;
        if (stk_dataset_get(ds, i, &r, true)) {
            fprintf(stderr, "%s\n", stk_last_error());
            return 1;
        }
        items[i] = (item){malloc(r.payload_len), r.payload_len, r.width, r.height};
        memcpy(items[i].data, r.payload, r.payload_len);
        bytes += r.payload_len;
        if (r.width > max_w) max_w = r.width;
        if (r.height > max_h) max_h = r.height;
    }
    stk_dataset_close(ds);
    rgb = malloc((size_t)max_w * max_h * 3 + 224 * 224 * 3);
    printf("%zu JPEGs preloaded (%.1f MB), one core, >= %.0f s per line\n", n_items, bytes / 1e6,
           min_seconds);

    tjhandle tj = tjInitDecompress();
    double ref = run("(a) libjpeg-turbo tjDecompress2, full RGB", tj_full, tj, 0);
    tjDestroy(tj);

    stk_jpeg_decoder *dec;
    stk_jpeg_decoder_create(64000000, &dec);
    run("(b) stoke full-size decode", stk_full, dec, ref);
    roi_ctx rc = {dec};
    stk_transform_parse("rrc:224", &rc.t);
    run("(c) stoke ROI + DCT-scaled decode for rrc:224", stk_roi, &rc, ref);
    /* (g): what Stoke's entropy decoder gives the crop decode, fast mode (the
     * loader's default for training) */
    stk_jpeg_decoder *lj;
    stk_jpeg_decoder_create(64000000, &lj);
    stk_jpeg_decoder_set_entropy(lj, false);
    stk_jpeg_decoder_set_fast(lj, true);
    stk_jpeg_decoder_set_fast(dec, true);
    stk_jpeg_decoder_set_entropy(dec, true);
    roi_ctx rl = {lj, rc.t};
    paired("(g) (c) fast, libjpeg-turbo's entropy decoder", stk_roi, &rl,
           "(g) (c) fast, stoke's entropy decoder", stk_roi, &rc);
    stk_jpeg_decoder_destroy(lj);
    stk_jpeg_decoder_destroy(dec);

    const char *specs[3] = {"rrc:224,flip", "rrc:224,flip", "resize:256,center:224"};
    const char *names[3] = {"(d) rrc:224,flip -> u8 HWC, fast decode",
                            "(D) rrc:224,flip -> u8 HWC, accurate decode",
                            "(e) resize:256,center:224 -> u8 HWC"};
    for (int k = 0; k < 3; k++) {
        stk_augment *a;
        stk_augment_options o = {.spec = specs[k],
                                 .format = STK_PIXELS_U8_HWC,
                                 .channels = 3,
                                 .seed = 1,
                                 .fast_decode = k == 0};
        if (stk_augment_create(&o, &a)) {
            fprintf(stderr, "%s\n", stk_last_error());
            return 1;
        }
        run(names[k], stk_transform_one, a, ref);
        stk_augment_destroy(a);
    }
    entropy_lines();
    loop_line();
    for (size_t i = 0; i < n_items; i++) free(items[i].data);
    free(items);
    free(rgb);
    return 0;
}
