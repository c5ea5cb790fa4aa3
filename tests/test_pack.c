/* pack/: the sources (IDX, CIFAR-10, class folders, list files) and the packer. */
#include "common/fs.h"
#include "pack/pack.h"
#include "pack/source.h"
#include "storage/dataset.h"
#include "tests/test_tmpdir.h"

#include "tests/check_main.h"

#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static void rm_rf(const char *path)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

static void setup(void) { test_tmpdir_create("pack"); }

static void teardown(void) { test_tmpdir_remove(); }

/* ---- sources ---- */

static void write_idx(const char *path, bool gz, const uint8_t *head, size_t hlen,
                      const uint8_t *body, size_t blen)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, head, (unsigned)hlen);
        gzwrite(f, body, (unsigned)blen);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(head, 1, hlen, f);
        fwrite(body, 1, blen, f);
        fclose(f);
    }
}

START_TEST(idx_source_plain_and_gzip)
{
    uint8_t ih[16] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 3};
    uint8_t lh[8] = {0, 0, 8, 1, 0, 0, 0, 5};
    uint8_t px[30], lb[5] = {3, 0, 9, 1, 1};
    for (int i = 0; i < 30; i++) px[i] = (uint8_t)(i * 5);
    for (int gz = 0; gz < 2; gz++) {
        mkdir(tpath("idx"), 0755);
        const char *ip =
            gz ? tpath("idx/t10k-images-idx3-ubyte.gz") : tpath("idx/train-images-idx3-ubyte");
        const char *lp =
            gz ? tpath("idx/t10k-labels-idx1-ubyte.gz") : tpath("idx/train-labels-idx1-ubyte");
        write_idx(ip, gz, ih, 16, px, 30);
        write_idx(lp, gz, lh, 8, lb, 5);
        stk_source *s;
        ck_assert_int_eq(stk_source_open_idx(tpath("idx"), NULL, gz ? "test" : "train", &s),
                         STK_OK);
        ck_assert_uint_eq(s->count, 5);
        ck_assert_uint_eq(s->width, 3);
        ck_assert_uint_eq(s->height, 2);
        ck_assert_uint_eq(s->num_classes, 10);
        ck_assert_int_eq(s->items[2].label, 9);
        uint8_t got[6]; /* read from the file (gzip: its decompressed temporary) */
        ck_assert_int_eq(stk_source_read_pixels(s, &s->items[4], got), STK_OK);
        ck_assert_uint_eq(got[0], 24 * 5);
        ck_assert_uint_eq(got[5], 29 * 5);
        ck_assert_str_eq(s->items[1].name,
                         gz ? "t10k-images-idx3-ubyte.gz#1" : "train-images-idx3-ubyte#1");
        stk_source_destroy(s);
        /* the two-paths form */
        ck_assert_int_eq(stk_source_open_idx(ip, lp, NULL, &s), STK_OK);
        ck_assert_uint_eq(s->count, 5);
        stk_source_destroy(s);
        /* truncated body */
        write_idx(ip, gz, ih, 16, px, 29);
        ck_assert_int_eq(stk_source_open_idx(ip, lp, NULL, &s), STK_ERR_CORRUPT);
        ck_assert(strstr(stk_last_error(), "truncated"));
        /* wrong magic (a labels file given as images) */
        ck_assert_int_eq(stk_source_open_idx(lp, lp, NULL, &s), STK_ERR_FORMAT);
        rm_rf(tpath("idx"));
    }
}
END_TEST

START_TEST(cifar_source_planes_to_hwc)
{
    mkdir(tpath("cifar"), 0755);
    FILE *f = fopen(tpath("cifar/test_batch.bin"), "wb");
    for (int r = 0; r < 3; r++) {
        fputc(r + 4, f);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < 1024; p++) fputc((p + c * 50 + r) & 0xFF, f);
    }
    fclose(f);
    stk_source *s;
    ck_assert_int_eq(stk_source_open_cifar10(tpath("cifar"), "test", &s), STK_OK);
    ck_assert_uint_eq(s->count, 3);
    ck_assert_uint_eq(s->channels, 3);
    ck_assert_str_eq(s->class_names[4], "deer");
    ck_assert_int_eq(s->items[1].label, 5);
    /* pixel 10 of record 2, channel 1 (green) */
    ck_assert_uint_eq(s->items[2].pixels[10 * 3 + 1], (10 + 50 + 2) & 0xFF);
    ck_assert_str_eq(s->items[2].name, "test_batch.bin#2");
    stk_source_destroy(s);
    ck_assert_int_eq(stk_source_open_cifar10(tpath("cifar"), "train", &s), STK_ERR_IO);
    ck_assert(strstr(stk_last_error(), "data_batch_1.bin"));
    f = fopen(tpath("cifar/test_batch.bin"), "ab");
    fputc(1, f);
    fclose(f);
    ck_assert_int_eq(stk_source_open_cifar10(tpath("cifar"), "test", &s), STK_ERR_FORMAT);
    ck_assert(strstr(stk_last_error(), "whole number"));
}
END_TEST

static void touch(const char *rel)
{
    FILE *f = fopen(tpath(rel), "w");
    ck_assert_ptr_nonnull(f);
    fputs("x", f);
    fclose(f);
}

START_TEST(folder_source_order_and_labels)
{
    mkdir(tpath("f"), 0755);
    mkdir(tpath("f/b"), 0755);
    mkdir(tpath("f/a"), 0755);
    mkdir(tpath("f/a-b"), 0755); /* sorts between a and b; "a-b/" < "a/" must not matter */
    mkdir(tpath("f/c_empty"), 0755);
    mkdir(tpath("f/a/sub"), 0755);
    touch("f/b/2.jpg");
    touch("f/b/1.JPEG");
    touch("f/a/z.jpg");
    touch("f/a/sub/y.jpg");
    touch("f/a/notes.txt");
    touch("f/a/.hidden.jpg");
    touch("f/a-b/q.png");
    touch("f/loose.jpg");
    stk_source *s;
    ck_assert_int_eq(stk_source_open_folder(tpath("f"), &s), STK_OK);
    ck_assert_uint_eq(s->num_classes, 4);
    ck_assert_str_eq(s->class_names[0], "a");
    ck_assert_str_eq(s->class_names[1], "a-b");
    ck_assert_str_eq(s->class_names[3], "c_empty");
    ck_assert_uint_eq(s->count, 5);
    const char *names[] = {"a/sub/y.jpg", "a/z.jpg", "a-b/q.png", "b/1.JPEG", "b/2.jpg"};
    int labels[] = {0, 0, 1, 2, 2};
    for (int i = 0; i < 5; i++) {
        ck_assert_str_eq(s->items[i].name, names[i]);
        ck_assert_int_eq(s->items[i].label, labels[i]);
    }
    stk_source_destroy(s);
    rm_rf(tpath("f"));
    mkdir(tpath("f"), 0755);
    ck_assert_int_eq(stk_source_open_folder(tpath("f"), &s), STK_ERR_FORMAT);
    ck_assert(strstr(stk_last_error(), "no class subfolders"));
}
END_TEST

START_TEST(list_source_parsing)
{
    FILE *f = fopen(tpath("list.txt"), "w");
    fputs("# comment\nimgs/a b.jpg 1\n\n  imgs/c.jpg\t0  \n/abs/d.jpg 3\n", f);
    fclose(f);
    stk_source *s;
    ck_assert_int_eq(stk_source_open_list(tpath("list.txt"), &s), STK_OK);
    ck_assert_uint_eq(s->count, 3);
    ck_assert_str_eq(s->items[0].name, "imgs/a b.jpg");
    ck_assert_str_eq(s->items[0].path, tpath("imgs/a b.jpg"));
    ck_assert_int_eq(s->items[1].label, 0);
    ck_assert_str_eq(s->items[2].path, "/abs/d.jpg");
    ck_assert_uint_eq(s->num_classes, 4);
    /* class names from a file */
    f = fopen(tpath("names.txt"), "w");
    fputs("zero\none\ntwo\nthree\n", f);
    fclose(f);
    ck_assert_int_eq(stk_source_load_class_names(s, tpath("names.txt")), STK_OK);
    ck_assert_str_eq(s->class_names[3], "three");
    f = fopen(tpath("names.txt"), "w");
    fputs("zero\none\n", f);
    fclose(f);
    ck_assert_int_eq(stk_source_load_class_names(s, tpath("names.txt")), STK_ERR_INVALID_ARG);
    ck_assert(strstr(stk_last_error(), "label 3"));
    stk_source_destroy(s);
    f = fopen(tpath("list.txt"), "w");
    fputs("a.jpg 1\nb.jpg one\n", f);
    fclose(f);
    ck_assert_int_eq(stk_source_open_list(tpath("list.txt"), &s), STK_ERR_INVALID_ARG);
    ck_assert_msg(strstr(stk_last_error(), "list.txt:2: label \"one\""), "%s", stk_last_error());
}
END_TEST

/* ---- pack (raw source; JPEG packing is tested end to end by the CLI tests) ---- */

static stk_source *raw_source(void)
{
    stk_source *s;
    ck_assert_int_eq(stk_source_create(&s, "synthetic"), STK_OK);
    s->encoding = STK_ENCODING_RAW_U8;
    s->width = 4, s->height = 3, s->channels = 3;
    s->pixels = malloc(500 * 36);
    for (int i = 0; i < 500 * 36; i++) s->pixels[i] = (uint8_t)((i * 37) ^ (i >> 5));
    for (int i = 0; i < 500; i++) {
        char name[32];
        snprintf(name, sizeof name, "s#%d", i);
        ck_assert_int_eq(stk_source_add_item(s, strdup(name), NULL, i % 3, s->pixels + 36 * i),
                         STK_OK);
    }
    ck_assert_int_eq(stk_source_set_numbered_classes(s, 3), STK_OK);
    return s;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*len);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

START_TEST(pack_is_deterministic_and_shuffle_keeps_labels)
{
    size_t len[3];
    uint8_t *bytes[3];
    for (int k = 0; k < 3; k++) {
        stk_source *s = raw_source();
        if (k == 2) stk_source_shuffle(s, 7);
        stk_pack_options o = {.workers = k == 0 ? 1 : 3};
        stk_pack_summary sum;
        char name[32];
        snprintf(name, sizeof name, "p%d.stoke", k);
        ck_assert_int_eq(stk_pack_run(s, tpath(name), &o, &sum), STK_OK);
        ck_assert_uint_eq(sum.records, 500);
        bytes[k] = slurp(tpath(name), &len[k]);
        stk_source_destroy(s);
    }
    ck_assert_uint_eq(len[0], len[1]);
    ck_assert(memcmp(bytes[0], bytes[1], len[0]) == 0);
    ck_assert(len[0] != len[2] || memcmp(bytes[0], bytes[2], len[0]) != 0);
    for (int k = 0; k < 3; k++) free(bytes[k]);

    stk_dataset *ds;
    ck_assert_int_eq(stk_dataset_open(tpath("p2.stoke"), &ds), STK_OK);
    const stk_meta *m = stk_dataset_meta(ds);
    ck_assert_uint_eq(m->count, 500);
    ck_assert(m->has_stats);
    int moved = 0;
    for (uint64_t i = 0; i < 500; i++) {
        stk_record r;
        ck_assert_int_eq(stk_dataset_get(ds, i, &r, true), STK_OK);
        char nm[16] = {0};
        memcpy(nm, r.name, r.name_len < 15 ? r.name_len : 15);
        int src_index = atoi(nm + 2);
        moved += src_index != (int)i;
        ck_assert_int_eq(r.label, src_index % 3);
        ck_assert_uint_eq(r.payload[0], (uint8_t)((36 * src_index * 37) ^ (36 * src_index >> 5)));
    }
    ck_assert_int_gt(moved, 400);
    /* mean of channel 0, computed directly */
    double sum0 = 0;
    stk_source *s = raw_source();
    for (int i = 0; i < 500 * 12; i++) sum0 += s->pixels[3 * i];
    ck_assert_double_eq_tol(m->mean[0], sum0 / (500 * 12) / 255.0, 1e-6);
    stk_source_destroy(s);
    stk_dataset_close(ds);
}
END_TEST

START_TEST(pack_cancel_leaves_nothing)
{
    stk_source *s = raw_source();
    volatile sig_atomic_t cancel = 1;
    stk_pack_options o = {.workers = 2, .cancel = &cancel};
    stk_pack_summary sum;
    ck_assert_int_eq(stk_pack_run(s, tpath("c.stoke"), &o, &sum), STK_ERR_CANCELLED);
    ck_assert_int_eq(test_dir_entries(test_tmp), 0);
    stk_source_destroy(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, idx_source_plain_and_gzip);
    tcase_add_test(tc, cifar_source_planes_to_hwc);
    tcase_add_test(tc, folder_source_order_and_labels);
    tcase_add_test(tc, list_source_parsing);
    tcase_add_test(tc, pack_is_deterministic_and_shuffle_keeps_labels);
    tcase_add_test(tc, pack_cancel_leaves_nothing);
    suite_add_tcase(s, tc);
    return stk_check_run(s);
}
