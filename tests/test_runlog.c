/* runlog/: PNG, the batch grid, TensorBoard's
 * record framing. (TensorBoard's own reader checks whole files in
 * tests/cli/test_runlog.sh.) */
#include "common/crc32c.h"
#include "runlog/class_report.h"
#include "runlog/confusion_image.h"
#include "runlog/image_grid.h"
#include "runlog/run_log.h"
#include "runlog/svg_chart.h"
#include "runlog/png.h"
#include "runlog/tfevents.h"

#include "tests/check_main.h"
#include "tests/test_tmpdir.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The PNG's chunks are well formed and its pixels inflate back exactly. */
/* Per-class figures against a confusion matrix worked out by hand:
 *            predicted   a   b   c
 *   true a               5   1   0     a: 6 images, 5 right; predicted 5+2+0 = 7
 *   true b               2   3   0     b: 5 images, 3 right; predicted 1+3+1 = 5
 *   true c               0   1   0     c: 1 image,  0 right; never predicted
 * recall a 5/6, b 3/5, c 0/1; precision a 5/7, b 3/5, c 0/0 (undefined);
 * F1 a 2(5/7)(5/6)/((5/7)+(5/6)) = 10/13, b 3/5, c NaN (precision NaN). */
START_TEST(class_report_from_a_hand_computed_matrix)
{
    const uint64_t cm[9] = {5, 1, 0, 2, 3, 0, 0, 1, 0};
    stk_class_figures f[3];
    stk_class_report(cm, 3, f);
    ck_assert(f[0].images == 6 && f[0].predicted == 7 && f[0].correct == 5);
    ck_assert(f[1].images == 5 && f[1].predicted == 5 && f[1].correct == 3);
    ck_assert(f[2].images == 1 && f[2].predicted == 0 && f[2].correct == 0);
    ck_assert_double_eq_tol(f[0].recall, 5.0 / 6, 1e-12);
    ck_assert_double_eq_tol(f[0].precision, 5.0 / 7, 1e-12);
    ck_assert_double_eq_tol(f[0].f1, 10.0 / 13, 1e-12);
    ck_assert_double_eq_tol(f[1].recall, 0.6, 1e-12);
    ck_assert_double_eq_tol(f[1].precision, 0.6, 1e-12);
    ck_assert_double_eq_tol(f[1].f1, 0.6, 1e-12);
    ck_assert_double_eq_tol(f[2].recall, 0, 1e-12);
    ck_assert(isnan(f[2].precision) && isnan(f[2].f1));
    const uint64_t zeros[4] = {0, 0, 0, 0}; /* no images at all: every ratio undefined */
    stk_class_report(zeros, 2, f);
    ck_assert(isnan(f[0].recall) && isnan(f[0].precision) && isnan(f[0].f1));
    const uint64_t wrong[4] = {0, 3, 2, 0}; /* both defined and 0: F1 0, not NaN */
    stk_class_report(wrong, 2, f);
    ck_assert(f[0].recall == 0 && f[0].precision == 0 && f[0].f1 == 0);

    const char *names[3] = {"a", "b,with comma", "c \"quoted\""};
    char *csv = stk_class_confusion_csv(cm, 3, names);
    ck_assert_str_eq(csv, "true\\predicted,a,\"b,with comma\",\"c \"\"quoted\"\"\"\n"
                          "a,5,1,0\n\"b,with comma\",2,3,0\n\"c \"\"quoted\"\"\",0,1,0\n");
    free(csv);
    csv = stk_class_confusion_csv(cm, 3, NULL); /* no names: the indices */
    ck_assert_str_eq(csv, "true\\predicted,0,1,2\n0,5,1,0\n1,2,3,0\n2,0,1,0\n");
    free(csv);
    char *json = stk_class_report_json(cm, 3, names);
    ck_assert_ptr_nonnull(
        strstr(json, "\"classes\": [\"a\", \"b,with comma\", \"c \\\"quoted\\\"\"]"));
    ck_assert_ptr_nonnull(strstr(json, "\"matrix\": [[5, 1, 0], [2, 3, 0], [0, 1, 0]]"));
    ck_assert_ptr_nonnull(strstr(json, "\"images\": 1, \"predicted\": 0, \"correct\": 0, "
                                       "\"precision\": null, \"recall\": 0.000000, \"f1\": null"));
    free(json);
    char *md = stk_class_report_markdown(cm, 3, names);
    ck_assert_ptr_nonnull(strstr(md, "| a | 6 | 83.33% | 71.43% | 76.92% |"));
    ck_assert_ptr_nonnull(strstr(md, "| c \"quoted\" | 1 | 0.00% | - | - |"));
    free(md);
}
END_TEST

/* The heatmap: a dark diagonal cell, a white empty one, sizes refused. */
START_TEST(confusion_image_shades_each_row)
{
    const uint64_t cm[4] = {9, 1, 0, 4};
    uint8_t *px;
    int w, h;
    ck_assert_int_eq(stk_confusion_image(cm, 2, NULL, &px, &w, &h), STK_OK);
    ck_assert(w > 2 * 48 && h > 2 * 48);
    /* the cells are 48 px at 2 classes, the grid's right and bottom edges pad
     * 6 px: the centre of row 1, column 0 (empty) and of row 1, column 1 (all) */
    int left = w - 6 - 2 * 48, top = h - 6 - 2 * 48;
    const uint8_t *empty = px + ((size_t)(top + 48 + 3) * w + (size_t)(left + 3)) * 3;
    const uint8_t *full = px + ((size_t)(top + 48 + 3) * w + (size_t)(left + 48 + 3)) * 3;
    ck_assert(empty[0] == 255 && empty[1] == 255 && empty[2] == 255);
    ck_assert(full[0] == 8 && full[1] == 48 && full[2] == 107);
    free(px);
    ck_assert_int_eq(stk_confusion_image(cm, 0, NULL, &px, &w, &h), STK_ERR_INVALID_ARG);
    ck_assert_ptr_null(px);
    ck_assert_int_eq(stk_confusion_image(cm, 1001, NULL, &px, &w, &h), STK_ERR_INVALID_ARG);
}
END_TEST

START_TEST(png_round_trips_through_zlib)
{
    enum { W = 7, H = 5, C = 3 };
    uint8_t px[W * H * C];
    for (int i = 0; i < W * H * C; i++) px[i] = (uint8_t)(i * 37);
    uint8_t *png;
    size_t n;
    ck_assert_int_eq(stk_png_encode(px, W, H, C, &png, &n), STK_OK);
    ck_assert_mem_eq(png, "\x89PNG\r\n\x1a\n", 8);
    ck_assert_uint_eq(be32(png + 8), 13);
    ck_assert_mem_eq(png + 12, "IHDR", 4);
    ck_assert_uint_eq(be32(png + 16), W);
    ck_assert_uint_eq(be32(png + 20), H);
    ck_assert_int_eq(png[24], 8);
    ck_assert_int_eq(png[25], 2); /* RGB */
    ck_assert_uint_eq(be32(png + 29), (uint32_t)crc32(0, png + 12, 17));
    uint32_t idat = be32(png + 33);
    ck_assert_mem_eq(png + 37, "IDAT", 4);
    ck_assert_uint_eq(be32(png + 41 + idat), (uint32_t)crc32(0, png + 37, idat + 4));
    uint8_t raw[H * (W * C + 1)];
    uLongf raw_len = sizeof raw;
    ck_assert_int_eq(uncompress(raw, &raw_len, png + 41, idat), Z_OK);
    ck_assert_uint_eq(raw_len, sizeof raw);
    for (int y = 0; y < H; y++) {
        ck_assert_int_eq(raw[y * (W * C + 1)], 0);
        ck_assert_mem_eq(raw + y * (W * C + 1) + 1, px + y * W * C, W * C);
    }
    ck_assert_mem_eq(png + n - 12, "\0\0\0\0IEND", 8);
    free(png);
    ck_assert_int_eq(stk_png_encode(px, W, H, 2, &png, &n), STK_ERR_INVALID_ARG);
    ck_assert_ptr_null(png);
}
END_TEST

/* Normalised floats back to the pixels they came from, tiled with borders. */
START_TEST(image_grid_undoes_normalisation)
{
    const float mean[3] = {0.5f, 0.25f, 0}, std[3] = {0.5f, 0.25f, 1};
    enum { N = 5, C = 3, H = 2, W = 3 };
    float x[N * C * H * W];
    uint8_t want[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++) {
        int ch = (i / (H * W)) % C;
        want[i] = (uint8_t)(i * 11);
        x[i] = (want[i] / 255.f - mean[ch]) / std[ch];
    }
    uint8_t *g;
    int gw, gh;
    ck_assert_int_eq(stk_image_grid_nchw(x, N, C, H, W, mean, std, 4, &g, &gw, &gh), STK_OK);
    ck_assert_int_eq(gw, 2 * W + 3 * 2); /* 4 cells: 2 x 2 with 2-pixel borders */
    ck_assert_int_eq(gh, 2 * H + 3 * 2);
    for (int i = 0; i < 4; i++)
        for (int ch = 0; ch < C; ch++)
            for (int y = 0; y < H; y++)
                for (int xx = 0; xx < W; xx++) {
                    int gx = 2 + (i % 2) * (W + 2) + xx, gy = 2 + (i / 2) * (H + 2) + y;
                    ck_assert_int_eq(g[(gy * gw + gx) * C + ch],
                                     want[((i * C + ch) * H + y) * W + xx]);
                }
    ck_assert_int_eq(g[0], 64); /* border */
    free(g);
}
END_TEST

static uint32_t le32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Every record: u64 length, masked CRC of it, data, masked CRC of the data;
 * the first holds file_version "brain.Event:2". */
START_TEST(tfevents_records_are_framed)
{
    uint32_t c = stk_crc32c(0, "123456789", 9);
    ck_assert_uint_eq(c, 0xe3069283u); /* the CRC-32C check value */
    ck_assert_uint_eq(stk_tfevents_masked_crc("123456789", 9),
                      ((c >> 15) | (c << 17)) + 0xa282ead8u);
    test_tmpdir_create("watch");
    stk_tfevents *w;
    ck_assert_int_eq(stk_tfevents_open(test_tmp, &w), STK_OK);
    ck_assert_ptr_nonnull(strstr(stk_tfevents_path(w), "/events.out.tfevents."));
    ck_assert_int_eq(stk_tfevents_scalar(w, "loss", 7, 0.5f), STK_OK);
    ck_assert_int_eq(stk_tfevents_text(w, "config", 0, "| a | b |"), STK_OK);
    uint8_t px[12] = {0};
    ck_assert_int_eq(stk_tfevents_image(w, "img", 0, px, 2, 2, 3), STK_OK);
    char *path = strdup(stk_tfevents_path(w));
    stk_tfevents_close(w);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int records = 0;
    for (size_t at = 0; at < n; records++) {
        ck_assert_uint_le(at + 12, n);
        uint64_t len = le32(buf + at) | (uint64_t)le32(buf + at + 4) << 32;
        ck_assert_uint_eq(le32(buf + at + 8), stk_tfevents_masked_crc(buf + at, 8));
        ck_assert_uint_le(at + 16 + len, n);
        ck_assert_uint_eq(le32(buf + at + 12 + len), stk_tfevents_masked_crc(buf + at + 12, len));
        if (records == 0) ck_assert_ptr_nonnull(memmem(buf + 12, len, "brain.Event:2", 13));
        if (records == 1) /* step 7: 10 07; simple_value 0.5: 15 00 00 00 3f */
            ck_assert_ptr_nonnull(memmem(buf + at + 12, len, "\x15\x00\x00\x00\x3f", 5));
        at += 16 + len;
    }
    ck_assert_int_eq(records, 4);
    free(path);
    ck_assert_int_eq(stk_tfevents_open("/nonexistent/dir", &w), STK_ERR_IO);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "/nonexistent/dir/events.out.tfevents."));
    test_tmpdir_remove();
}
END_TEST

START_TEST(chart_ticks_are_nice)
{
    double t[16];
    int n = stk_chart_ticks(0, 1, t, 16);
    ck_assert_int_eq(n, 6); /* 0, 0.2, ..., 1 */
    for (int i = 0; i < n; i++) ck_assert_double_eq_tol(t[i], 0.2 * i, 1e-12);
    n = stk_chart_ticks(-0.3, 47, t, 16); /* step 10: 0..40 */
    ck_assert_int_eq(n, 5);
    ck_assert_double_eq(t[0], 0);
    ck_assert_double_eq(t[4], 40);
    n = stk_chart_ticks(0.00123, 0.00456, t, 16); /* step 0.001: 0.002, 0.003, 0.004 */
    ck_assert_int_eq(n, 3);
    ck_assert_double_eq_tol(t[0], 0.002, 1e-15);
    ck_assert_double_eq_tol(t[2], 0.004, 1e-15);
    ck_assert_int_eq(stk_chart_ticks(3, 3, t, 16), 1);
    ck_assert_double_eq(t[0], 3);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Columns by name, empty cells NaN, a torn last line ignored, x from the
 * first column or from "step". */
START_TEST(run_log_reads_columns_by_name)
{
    test_tmpdir_create("runlog");
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.csv", test_tmp);
    write_text(path, "epoch,step,lr,val_loss\n1,10,0.5,\n2,20,0.25,1.5\n3,30,0.1");
    snprintf(path, sizeof path, "%s/steps.csv", test_tmp);
    write_text(path, "step,epoch,loss,lr\n1,1,2.5,0.5\n2,1,2.25,0.5\n");
    stk_run_log *log;
    ck_assert_int_eq(stk_run_log_read(test_tmp, &log), STK_OK);
    const stk_series *v = stk_run_log_epoch(log, "val_loss");
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->n, 2);
    ck_assert(isnan(v->y[0]));
    ck_assert_double_eq(v->x[1], 2);
    ck_assert_double_eq(v->y[1], 1.5);
    const stk_series *at = stk_run_log_epoch_at_steps(log, "lr");
    ck_assert_double_eq(at->x[1], 20);
    ck_assert_double_eq(at->y[1], 0.25);
    const stk_series *loss = stk_run_log_step(log, "loss");
    ck_assert_uint_eq(loss->n, 2);
    ck_assert_double_eq(loss->y[1], 2.25);
    ck_assert_ptr_null(stk_run_log_epoch(log, "top9"));
    stk_run_log_free(log);
    snprintf(path, sizeof path, "%s/metrics.csv", test_tmp);
    write_text(path, "epoch,step\n1,1e999\n");
    ck_assert_int_eq(stk_run_log_read(test_tmp, &log), STK_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "metrics.csv: line 2: step is not a number"));
    test_tmpdir_remove();
}
END_TEST

/* Hostile logs: bytes parsed with explicit lengths (a buffer without NUL,
 * a blank row), long logs averaged down to what a chart draws, values whose
 * range overflows a double drawn without NaN coordinates. */
START_TEST(run_log_hostile_rows_and_sizes)
{
    /* no NUL after the bytes: a heap copy of exactly len (ASan sees a read past it) */
    const char csv[] = "epoch,loss\n1,2\n   \n3,1e308\n4,-1e308\n";
    char *exact = malloc(sizeof csv - 1);
    memcpy(exact, csv, sizeof csv - 1);
    stk_run_log *log;
    ck_assert_int_eq(stk_run_log_parse("d", exact, sizeof csv - 1, NULL, 0, &log), STK_OK);
    const stk_series *l = stk_run_log_epoch(log, "loss");
    ck_assert_uint_eq(l->n, 4);
    ck_assert(isnan(l->x[1]) && isnan(l->y[1])); /* the blank row: empty cells */
    ck_assert_double_eq(l->y[2], 1e308);
    stk_svg *svg;
    ck_assert_int_eq(stk_svg_begin(900, 600, &svg), STK_OK);
    stk_chart_line line = {.s = l, .color = "#123456", .dashed = false};
    stk_svg_panel(svg, (stk_rect){60, 40, 380, 220}, "loss", "epoch", &line, 1);
    char *text;
    size_t len;
    ck_assert_int_eq(stk_svg_end(svg, &text, &len), STK_OK);
    ck_assert_ptr_null(strstr(text, "nan"));
    ck_assert_ptr_null(strstr(text, "inf"));
    ck_assert_ptr_nonnull(strstr(text, "<polyline"));
    free(text);
    stk_run_log_free(log);
    free(exact);
    /* 100,000 rows: kept as 8,192 points at most, each the mean of its run */
    size_t rows = 100000, cap = 32 + rows * 24, n = 0;
    char *big = malloc(cap);
    n += (size_t)snprintf(big + n, cap - n, "step,epoch,loss,lr\n");
    for (size_t i = 0; i < rows; i++)
        n += (size_t)snprintf(big + n, cap - n, "%zu,1,%zu,0.5\n", i + 1, i % 2);
    ck_assert_int_eq(stk_run_log_parse("d", "epoch,step\n", 11, big, n, &log), STK_OK);
    const stk_series *s = stk_run_log_step(log, "loss");
    ck_assert_uint_le(s->n, 8192);
    ck_assert_uint_ge(s->n, 4096);
    ck_assert_double_eq_tol(s->y[0], 6.0 / 13, 1e-12);      /* 0,1,0,...,0: six ones in 13 */
    ck_assert_double_eq_tol(s->x[0], (1 + 13) / 2.0, 1e-9); /* steps 1..13: 13 rows per point */
    stk_run_log_free(log);
    free(big);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("watch");
    TCase *tc = tcase_create("watch");
    tcase_add_test(tc, png_round_trips_through_zlib);
    tcase_add_test(tc, class_report_from_a_hand_computed_matrix);
    tcase_add_test(tc, confusion_image_shades_each_row);
    tcase_add_test(tc, image_grid_undoes_normalisation);
    tcase_add_test(tc, tfevents_records_are_framed);
    tcase_add_test(tc, chart_ticks_are_nice);
    tcase_add_test(tc, run_log_reads_columns_by_name);
    tcase_add_test(tc, run_log_hostile_rows_and_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return stk_check_run(suite()); }
