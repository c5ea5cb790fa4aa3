/* Checkpoints and the safetensors format: round trips (model and optimizer,
 * training resumed bit-identically), strict and partial loading, damaged
 * files, atomic writes under kill -9. */
#include "check_main.h"
#include "engine/checkpoint.h"
#include "storage/safetensors.h"
#include "engine_testlib.h"
#include "test_tmpdir.h"
#include "train/trainer.h"

#include <fcntl.h>
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/wait.h>

static char path_buf[700];
static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", test_tmp, name);
    return path_buf;
}

static stk_model *make(const char *name, int classes, uint64_t seed)
{
    stk_model_config c = {
        .name = name, .in_channels = 1, .classes = classes, .image_size = 8, .seed = seed};
    if (!strcmp(name, "resnet18")) c.in_channels = 3;
    stk_model *m;
    ck_assert_int_eq(stk_model_create(&c, &m), STK_OK);
    return m;
}

/* `steps` of the trainer's step on random batches (batch s from seed s). */
static void train(stk_model *m, stk_optim *opt, int first_step, int steps)
{
    int ch = stk_model_get_config(m)->in_channels;
    stk_trainer *t;
    stk_trainer_config tc = stk_trainer_defaults();
    ck_assert_int_eq(stk_trainer_create(&tc, m, opt, &t), STK_OK);
    for (int s = first_step; s < first_step + steps; s++) {
        stk_scope *sc;
        ck_assert_int_eq(stk_scope_begin(&sc), STK_OK);
        int64_t xs[4] = {4, ch, 8, 8}, ys[1] = {4};
        stk_tensor *x = rand_tensor((uint64_t)s, 4, xs, -1, 1), *y;
        int32_t lab[4] = {s % 3, 1, 2, 0};
        ck_assert_int_eq(stk_tensor_from_host(STK_I32, 1, ys, lab, &y), STK_OK);
        stk_step_result r;
        ck_assert_int_eq(stk_trainer_step_tensors(t, x, y, lab, &r), STK_OK);
        stk_scope_end(sc);
    }
    stk_trainer_destroy(t);
}

static bool same_weights(const stk_model *a, const stk_model *b)
{
    for (int i = 0; i < stk_model_param_count(a); i++) {
        stk_tensor *x = stk_model_param(a, i)->value, *y = stk_model_param(b, i)->value;
        size_t bytes = (size_t)stk_tensor_numel(x) * stk_dtype_size(stk_tensor_dtype(x));
        if (memcmp(stk_tensor_data(x), stk_tensor_data(y), bytes)) return false;
    }
    return true;
}

START_TEST(test_resume_is_bit_identical)
{
    test_tmpdir_create("ckpt");
    stk_optim_kind kinds[2] = {STK_OPTIM_SGD, STK_OPTIM_ADAMW};
    for (int k = 0; k < 2; k++) {
        stk_optim_config oc = {.kind = kinds[k],
                               .lr = 0.05f,
                               .momentum = 0.9f,
                               .nesterov = true,
                               .weight_decay = 5e-4f};
        /* uninterrupted: 6 steps */
        stk_model *a = make("resnet8", 3, 1);
        stk_optim *oa;
        ck_assert_int_eq(stk_optim_create(&oc, a, &oa), STK_OK);
        train(a, oa, 0, 6);
        /* interrupted after 3, saved, loaded into fresh objects, 3 more */
        stk_model *b = make("resnet8", 3, 1);
        stk_optim *ob;
        ck_assert_int_eq(stk_optim_create(&oc, b, &ob), STK_OK);
        train(b, ob, 0, 3);
        const char *keys[2] = {"epoch", "step"}, *values[2] = {"1", "3"};
        ck_assert_int_eq(stk_checkpoint_save(tmp_path("last.safetensors"), b, ob, 2, keys, values),
                         STK_OK);
        stk_optim_destroy(ob);
        stk_model_destroy(b);
        stk_model *c = make("resnet8", 3, 99); /* other initial weights: all overwritten */
        stk_optim *oc2;
        ck_assert_int_eq(stk_optim_create(&oc, c, &oc2), STK_OK);
        stk_load_report rep;
        stk_status st = stk_checkpoint_load(tmp_path("last.safetensors"), c, oc2, true, &rep);
        ck_assert_msg(st == STK_OK, "%s", stk_last_error());
        ck_assert(rep.optimizer);
        ck_assert_int_eq(rep.loaded, stk_model_param_count(c));
        ck_assert_int_eq(stk_optim_steps(oc2), 3);
        train(c, oc2, 3, 3);
        ck_assert_msg(same_weights(a, c), "resumed weights differ (%s)",
                      stk_optim_kind_name(kinds[k]));
        ck_assert_int_eq(
            *(int32_t *)stk_tensor_data(stk_model_find(c, "bn1.num_batches_tracked")->value), 6);
        /* metadata */
        stk_safetensors *f;
        ck_assert_int_eq(stk_safetensors_read(tmp_path("last.safetensors"), &f), STK_OK);
        ck_assert_str_eq(stk_safetensors_meta(f, "model"), "resnet8");
        ck_assert_str_eq(stk_safetensors_meta(f, "format"), "stoke-checkpoint");
        ck_assert_str_eq(stk_safetensors_meta(f, "epoch"), "1");
        ck_assert_int_eq(stk_safetensors_find(f, "bn1.num_batches_tracked")->dtype, STK_ST_I64);
        ck_assert_ptr_nonnull(stk_safetensors_find(f, kinds[k] == STK_OPTIM_SGD
                                                          ? "optim.fc.weight.momentum_buffer"
                                                          : "optim.fc.weight.exp_avg_sq"));
        stk_safetensors_free(f);
        stk_optim_destroy(oa);
        stk_optim_destroy(oc2);
        stk_model_destroy(a);
        stk_model_destroy(c);
    }
    test_tmpdir_remove();
}
END_TEST

START_TEST(test_strict_and_partial_loading)
{
    test_tmpdir_create("ckpt");
    stk_model *a = make("resnet18", 10, 1);
    ck_assert_int_eq(stk_checkpoint_save(tmp_path("r18.safetensors"), a, NULL, 0, NULL, NULL),
                     STK_OK);
    /* other classes: strict refuses, naming fc.weight, and changes nothing */
    stk_model *b = make("resnet18", 100, 2), *b0 = make("resnet18", 100, 2);
    stk_load_report rep;
    ck_assert_int_eq(stk_checkpoint_load(tmp_path("r18.safetensors"), b, NULL, true, &rep),
                     STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "fc.weight"));
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "[10, 512]"));
    ck_assert(same_weights(b, b0));
    /* partial: everything but the classifier */
    ck_assert_int_eq(stk_checkpoint_load(tmp_path("r18.safetensors"), b, NULL, false, &rep),
                     STK_OK);
    ck_assert_int_eq(rep.mismatched, 2);
    ck_assert_int_eq(rep.loaded, stk_model_param_count(b) - 2);
    ck_assert_ptr_nonnull(strstr(rep.text, "not loaded: fc.weight"));
    ck_assert(!memcmp(stk_tensor_data(stk_model_find(a, "layer3.1.conv2.weight")->value),
                      stk_tensor_data(stk_model_find(b, "layer3.1.conv2.weight")->value),
                      256 * 256 * 9 * 4));
    /* another model: strict names it; partial loads nothing and says so */
    stk_model *c = make("resnet8", 10, 1);
    ck_assert_int_eq(stk_checkpoint_load(tmp_path("r18.safetensors"), c, NULL, true, &rep),
                     STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "resnet18 model, not resnet8"));
    ck_assert_int_eq(stk_checkpoint_load(tmp_path("r18.safetensors"), c, NULL, false, &rep),
                     STK_OK);
    ck_assert_int_gt(rep.unexpected, 0);
    ck_assert_int_gt(rep.mismatched + rep.missing, 0);
    stk_model_destroy(a);
    stk_model_destroy(b);
    stk_model_destroy(b0);
    stk_model_destroy(c);
    test_tmpdir_remove();
}
END_TEST

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

static stk_status load_any(const char *path)
{
    stk_model *m = make("mlp", 3, 1);
    stk_load_report rep;
    stk_status st = stk_checkpoint_load(path, m, NULL, true, &rep);
    stk_model_destroy(m);
    return st;
}

START_TEST(test_damaged_files)
{
    test_tmpdir_create("ckpt");
    stk_model *m = make("mlp", 3, 1);
    ck_assert_int_eq(stk_checkpoint_save(tmp_path("good.safetensors"), m, NULL, 0, NULL, NULL),
                     STK_OK);
    uint8_t *data;
    size_t len;
    FILE *f = fopen(tmp_path("good.safetensors"), "rb");
    fseek(f, 0, SEEK_END);
    len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc(len);
    ck_assert_uint_eq(fread(data, 1, len, f), len);
    fclose(f);
    /* truncated: names the tensor whose data is cut */
    write_bytes(tmp_path("cut.safetensors"), data, len - 100);
    ck_assert_int_eq(load_any(tmp_path("cut.safetensors")), STK_ERR_CORRUPT);
    ck_assert_msg(strstr(stk_last_error(), "fc3.weight") != NULL, "%s", stk_last_error());
    /* tiny, huge header length, broken JSON, not safetensors at all */
    write_bytes(tmp_path("tiny.safetensors"), data, 5);
    ck_assert_int_eq(load_any(tmp_path("tiny.safetensors")), STK_ERR_FORMAT);
    uint8_t *bad = malloc(len);
    memcpy(bad, data, len);
    bad[6] = 0x7f;
    write_bytes(tmp_path("hlen.safetensors"), bad, len);
    ck_assert_int_eq(load_any(tmp_path("hlen.safetensors")), STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "header length"));
    memcpy(bad, data, len);
    bad[8] = '[';
    write_bytes(tmp_path("json.safetensors"), bad, len);
    ck_assert_int_eq(load_any(tmp_path("json.safetensors")), STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "json.safetensors"));
    char *hdr = (char *)bad + 8, *v;
    memcpy(bad, data, len);
    ck_assert_ptr_nonnull(v = strstr(hdr, "\"format_version\":\"1\""));
    v[18] = '7';
    write_bytes(tmp_path("v7.safetensors"), bad, len);
    ck_assert_int_eq(load_any(tmp_path("v7.safetensors")), STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "version '7'"));
    memcpy(bad, data, len);
    ck_assert_ptr_nonnull(v = strstr(hdr, "\"F32\""));
    memcpy(v, "\"Q32\"", 5);
    write_bytes(tmp_path("dtype.safetensors"), bad, len);
    ck_assert_int_eq(load_any(tmp_path("dtype.safetensors")), STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "Q32"));
    ck_assert_int_eq(load_any(tmp_path("absent.safetensors")), STK_ERR_IO);
    /* a failed save leaves no temporary behind and the old file intact */
    ck_assert_int_eq(stk_checkpoint_save("/nonexistent-dir/x.safetensors", m, NULL, 0, NULL, NULL),
                     STK_ERR_IO);
    ck_assert_int_eq(load_any(tmp_path("good.safetensors")), STK_OK);
    free(bad);
    free(data);
    stk_model_destroy(m);
    test_tmpdir_remove();
}
END_TEST

/* A safetensors file from a JSON header and `data_len` zero bytes of data. */
static void write_st(const char *path, const char *header, size_t data_len)
{
    size_t h = strlen(header);
    uint8_t *b = calloc(8 + h + data_len + 1, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    write_bytes(path, b, 8 + h + data_len);
    free(b);
}

static stk_status read_st(const char *path)
{
    stk_safetensors *f;
    stk_status st = stk_safetensors_read(path, &f);
    stk_safetensors_free(f);
    return st;
}

/* Hostile headers: element counts that overflow, overlapping or gapped byte
 * ranges, a \u escape cut by the header's end, and a duplicate check that
 * stays fast for a huge tensor count. */
START_TEST(test_hostile_headers)
{
    test_tmpdir_create("ckpt");
    const char *p = tmp_path("h.safetensors");
    write_st(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
             0);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    ck_assert_msg(strstr(stk_last_error(), "too many elements"), "%s", stk_last_error());
    write_st(p,
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
             6);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    ck_assert_msg(strstr(stk_last_error(), "overlap"), "%s", stk_last_error());
    write_st(p,
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
             10);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    ck_assert_msg(strstr(stk_last_error(), "tensor b: data starts at byte 6"), "%s",
                  stk_last_error());
    write_st(p, "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 9);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    ck_assert_msg(strstr(stk_last_error(), "the file has 9 data bytes"), "%s", stk_last_error());
    /* "\u00" then the header ends: the parser must not read past it. */
    write_st(p, "{\"\\u00", 0);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    write_st(p, "{\"\\u00zz\":1}", 0);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    ck_assert_msg(strstr(stk_last_error(), "line 1, column 7: invalid escape"), "%s",
                  stk_last_error());
    /* \u escapes of any code point (Python's json.dumps writes class names so) */
    write_st(p,
             "{\"__metadata__\":{\"classes\":\"caf\\u00e9 \\ud83d\\ude00 \\u4e2d\"},"
             "\"t\\u00e9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
             1);
    stk_safetensors *sf;
    ck_assert_int_eq(stk_safetensors_read(p, &sf), STK_OK);
    ck_assert_str_eq(stk_safetensors_meta(sf, "classes"), "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad");
    ck_assert_ptr_nonnull(stk_safetensors_find(sf, "t\xc3\xa9"));
    stk_safetensors_free(sf);
    write_st(p, "{\"\\ud83d\":1}", 0); /* a lone surrogate */
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    write_st(p, "{\"\\u0000\":1}", 0); /* NUL: a C string cannot hold it */
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT);
    /* 200,000 one-byte tensors, the last two with the same name. */
    enum { N = 200000 };
    size_t cap = (size_t)N * 96 + 16, n = 0; /* an entry is at most ~75 bytes */
    char *h = malloc(cap);
    n += (size_t)snprintf(h + n, cap - n, "{");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(h + n, cap - n,
                              "%s\"t%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                              i ? "," : "", i == N - 1 ? N - 2 : i, i, i + 1);
    snprintf(h + n, cap - n, "}");
    write_st(p, h, N);
    ck_assert_int_eq(read_st(p), STK_ERR_FORMAT); /* quadratic, this took over a minute */
    ck_assert_msg(strstr(stk_last_error(), "duplicate object key near '\"t199998\"'"), "%s",
                  stk_last_error());
    free(h);
    test_tmpdir_remove();
}
END_TEST

/* Files in dir whose names start with prefix. */
static int count_temporaries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

START_TEST(test_kill_during_write_never_tears)
{
    test_tmpdir_create("ckpt");
    const char *p = tmp_path("ckpt.safetensors");
    char target[700];
    snprintf(target, sizeof target, "%s", p);
    stk_model *m = make("resnet18", 10, 1); /* ~45 MB per write */
    ck_assert_int_eq(stk_checkpoint_save(target, m, NULL, 0, NULL, NULL), STK_OK);
    /* At least 4 kills, and more (later each time) until one has landed
     * inside a write, leaving its temporary: on a loaded machine the first
     * kills can come before the child's first write has begun. */
    int leftovers = 0;
    for (int round = 0; round < 16 && (round < 4 || leftovers == 0); round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            for (int i = 0;; i++) {
                char step[16];
                snprintf(step, sizeof step, "%d", i);
                const char *k[1] = {"step"}, *v[1] = {step};
                stk_checkpoint_save(target, m, NULL, 1, k, v);
            }
        }
        usleep(40000 + 37000 * (useconds_t)round); /* somewhere inside a write */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        stk_model *r = make("resnet18", 10, 5);
        stk_load_report rep;
        ck_assert_msg(stk_checkpoint_load(target, r, NULL, true, &rep) == STK_OK, "round %d: %s",
                      round, stk_last_error());
        ck_assert(same_weights(m, r));
        stk_model_destroy(r);
        leftovers = count_temporaries(test_tmp, "ckpt.safetensors.tmp.");
    }
    /* the kills did land inside writes: their temporaries are still there */
    ck_assert_int_ge(leftovers, 1);
    stk_model_destroy(m);
    test_tmpdir_remove();
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *t = tcase_create("checkpoint");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_resume_is_bit_identical);
    tcase_add_test(t, test_strict_and_partial_loading);
    tcase_add_test(t, test_damaged_files);
    tcase_add_test(t, test_hostile_headers);
    tcase_add_test(t, test_kill_during_write_never_tears);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(checkpoint_suite()); }
