/* The ONNX reader (engine/onnx_read.h): files torch.onnx.export wrote
 * (tests/fixtures/make_onnx_fixtures.py, committed under tests/data/onnx),
 * Stoke's own exports read back, and damaged or hostile files refused
 * with the file, the field and the reason. */
#include "check_main.h"
#include "common/pb_wire.h"
#include "engine/nn.h"
#include "engine/onnx.h"
#include "engine/onnx_read.h"
#include "storage/safetensors.h"
#include "test_tmpdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *data_path(const char *name)
{
    static char p[512];
    const char *dir = getenv("STOKE_TEST_DATA");
    snprintf(p, sizeof p, "%s/onnx/%s", dir ? dir : "tests/data", name);
    return p;
}

static const stk_onnx_node *node_of(const stk_onnx_model *m, const char *op)
{
    for (int i = 0; i < m->n_nodes; i++)
        if (!strcmp(m->nodes[i].op_type, op)) return &m->nodes[i];
    return NULL;
}

static void expect_ints(const stk_onnx_node *n, const char *attr, int count, const int64_t *want)
{
    const stk_onnx_attr *a = stk_onnx_node_attr(n, attr);
    ck_assert_msg(a != NULL, "%s has no %s", n->name, attr);
    ck_assert_int_eq(a->type, STK_ONNX_ATTR_INTS);
    ck_assert_int_eq(a->n, count);
    for (int i = 0; i < count; i++) ck_assert_int_eq(a->ints[i], want[i]);
}

START_TEST(test_reads_pytorch_training_export)
{
    stk_onnx_model *m;
    ck_assert_msg(stk_onnx_read_file(data_path("tiny_train.onnx"), &m) == STK_OK, "%s",
                  stk_last_error());
    ck_assert_int_eq(m->ir_version, 8);
    ck_assert_int_eq(m->opset, 17);
    ck_assert_str_eq(m->producer, "pytorch");
    static const char *ops[] = {
        "Conv", "BatchNormalization", "Relu", "GlobalAveragePool", "Flatten", "Gemm"};
    ck_assert_int_eq(m->n_nodes, 6);
    for (int i = 0; i < 6; i++) ck_assert_str_eq(m->nodes[i].op_type, ops[i]);
    const stk_onnx_node *conv = node_of(m, "Conv");
    ck_assert_str_eq(conv->name, "/conv/Conv");
    ck_assert_int_eq(conv->n_inputs, 2);
    ck_assert_str_eq(conv->inputs[0], "input");
    ck_assert_str_eq(conv->inputs[1], "conv.weight");
    expect_ints(conv, "kernel_shape", 2, (int64_t[]){3, 3});
    expect_ints(conv, "pads", 4, (int64_t[]){1, 1, 1, 1});
    expect_ints(conv, "strides", 2, (int64_t[]){1, 1});
    ck_assert_int_eq(stk_onnx_node_attr(conv, "group")->i, 1);
    /* training mode: a trainable batch norm with its three outputs */
    const stk_onnx_node *bn = node_of(m, "BatchNormalization");
    ck_assert_int_eq(bn->n_inputs, 5);
    ck_assert_int_eq(bn->n_outputs, 3);
    ck_assert_int_eq(stk_onnx_node_attr(bn, "training_mode")->i, 1);
    ck_assert(fabsf(stk_onnx_node_attr(bn, "epsilon")->f - 1e-5f) < 1e-9f);
    ck_assert(fabsf(stk_onnx_node_attr(bn, "momentum")->f - 0.9f) < 1e-6f);
    ck_assert_int_eq(stk_onnx_node_attr(node_of(m, "Gemm"), "transB")->i, 1);
    ck_assert(stk_onnx_node_attr(bn, "no_such") == NULL);
    /* every state_dict tensor an initializer of its own name, the same values */
    stk_safetensors *st;
    ck_assert_int_eq(stk_safetensors_read(data_path("tiny_state.safetensors"), &st), STK_OK);
    int matched = 0;
    for (int i = 0; i < st->n; i++) {
        const stk_st_entry *e = &st->entries[i];
        const stk_onnx_tensor *t = stk_onnx_initializer(m, e->name);
        if (!strcmp(e->name, "bn.num_batches_tracked")) { /* a counter ONNX does not carry */
            ck_assert(t == NULL);
            continue;
        }
        ck_assert_msg(t != NULL, "no initializer %s", e->name);
        ck_assert_int_eq(t->dtype, STK_ONNX_FLOAT);
        ck_assert_int_eq(t->ndim, e->ndim);
        for (int d = 0; d < e->ndim; d++) ck_assert_int_eq(t->dims[d], e->shape[d]);
        ck_assert_uint_eq(t->bytes, e->end - e->begin);
        ck_assert(!memcmp(t->data, stk_safetensors_data(st, e), t->bytes));
        matched++;
    }
    ck_assert_int_eq(matched, 7);
    ck_assert_int_eq(m->n_initializers, 7);
    stk_safetensors_free(st);
    ck_assert_int_eq(m->n_inputs, 1);
    ck_assert_str_eq(m->inputs[0].name, "input");
    ck_assert_int_eq(m->inputs[0].elem_type, STK_ONNX_FLOAT);
    ck_assert_int_eq(m->inputs[0].ndim, 4);
    ck_assert_int_eq(m->inputs[0].dims[1], 3);
    ck_assert_str_eq(m->outputs[0].name, "logits");
    stk_onnx_model_destroy(m);

    /* eval mode with constant folding: no batch norm, the convolution's
     * weights folded and renamed */
    ck_assert_int_eq(stk_onnx_read_file(data_path("tiny_eval.onnx"), &m), STK_OK);
    ck_assert(node_of(m, "BatchNormalization") == NULL);
    ck_assert(stk_onnx_initializer(m, "conv.weight") == NULL);
    ck_assert_int_eq(node_of(m, "Conv")->n_inputs, 3);
    stk_onnx_model_destroy(m);
}
END_TEST

/* Stoke's exporter read back by the reader: the same initializers, by
 * name and value, as the model's parameters. */
START_TEST(test_reads_stoke_export)
{
    char path[600];
    test_tmpdir_create("test_onnx");
    snprintf(path, sizeof path, "%s/resnet8.onnx", test_tmp);
    stk_model_config cfg = {.name = "resnet8", .in_channels = 1, .classes = 10, .image_size = 28};
    stk_model *model;
    ck_assert_int_eq(stk_model_create(&cfg, &model), STK_OK);
    stk_model_train(model, false);
    stk_onnx_options o = stk_onnx_defaults();
    o.fold_bn = false;
    ck_assert_msg(stk_onnx_export(model, path, &o) == STK_OK, "%s", stk_last_error());
    stk_onnx_model *m;
    ck_assert_msg(stk_onnx_read_file(path, &m) == STK_OK, "%s", stk_last_error());
    ck_assert_int_eq(m->opset, 17);
    ck_assert_int_eq(m->outputs[0].ndim, 2);
    ck_assert_str_eq(m->outputs[0].dim_param[0], "batch");
    ck_assert_int_eq(m->outputs[0].dims[0], -1);
    ck_assert_int_eq(m->outputs[0].dims[1], 10);
    int found = 0;
    for (int i = 0; i < stk_model_param_count(model); i++) {
        const stk_param *p = stk_model_param(model, i);
        const stk_onnx_tensor *t = stk_onnx_initializer(m, p->name);
        if (!t) continue; /* num_batches_tracked */
        int64_t n = stk_tensor_numel(p->value);
        float *v = malloc(sizeof(float) * (size_t)n);
        ck_assert_int_eq(stk_tensor_to_host(p->value, v, sizeof(float) * (size_t)n), STK_OK);
        ck_assert_uint_eq(t->bytes, sizeof(float) * (size_t)n);
        ck_assert_msg(!memcmp(t->data, v, t->bytes), "%s differs", p->name);
        free(v);
        found++;
    }
    ck_assert_int_ge(found, 20);
    ck_assert(node_of(m, "BatchNormalization") != NULL);
    stk_onnx_model_destroy(m);
    stk_model_destroy(model);
    test_tmpdir_remove();
}
END_TEST

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t *b = malloc(1 << 16);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

/* Damaged files: every cut of a real one, bytes that are not ONNX, and
 * files that are ONNX but beyond what the reader takes. */
START_TEST(test_refuses_damaged_and_hostile_files)
{
    size_t len;
    uint8_t *b = slurp(data_path("tiny_train.onnx"), &len);
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        stk_onnx_model *m = NULL;
        stk_status st = stk_onnx_read(b, cut, "cut.onnx", &m);
        /* a cut on a field boundary can still be valid protobuf */
        ck_assert_msg(st == STK_OK || st == STK_ERR_CORRUPT, "cut at %zu: %d", cut, st);
        if (st != STK_OK) {
            ck_assert(m == NULL);
            ck_assert_msg(!strncmp(stk_last_error(), "cut.onnx: ", 10), "%s", stk_last_error());
            refused++;
        }
        stk_onnx_model_destroy(m);
    }
    ck_assert_int_ge(refused, (int)len * 9 / 10);
    /* one flipped byte at a time: refused or read, never a crash (ASan) */
    for (size_t i = 0; i < len; i++) {
        uint8_t keep = b[i];
        b[i] ^= 0xA5;
        stk_onnx_model *m = NULL;
        stk_status st = stk_onnx_read(b, len, "flip.onnx", &m);
        ck_assert(st == STK_OK || st == STK_ERR_CORRUPT || st == STK_ERR_UNSUPPORTED);
        stk_onnx_model_destroy(m);
        b[i] = keep;
    }
    free(b);

    stk_onnx_model *m;
    ck_assert_int_eq(stk_onnx_read("", 0, "empty.onnx", &m), STK_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "empty.onnx: not an ONNX model"));
    static const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0};
    ck_assert_int_eq(stk_onnx_read(jpeg, sizeof jpeg, "photo.onnx", &m), STK_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "not an ONNX model"));
    ck_assert_int_eq(stk_onnx_read_file("no/such/file.onnx", &m), STK_ERR_IO);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "no/such/file.onnx"));
}
END_TEST

/* A ModelProto around one initializer, written with the protobuf writer. */
static void model_with_tensor(stk_pb *b, int ndim, int64_t dim, int64_t data_bytes, bool external)
{
    stk_pb_init(b);
    stk_pb_int(b, 1, 8); /* ir_version */
    size_t g = stk_pb_begin(b, 7);
    size_t t = stk_pb_begin(b, 5);
    for (int i = 0; i < ndim; i++) stk_pb_int(b, 1, dim);
    stk_pb_int(b, 2, STK_ONNX_FLOAT);
    stk_pb_string(b, 8, "w");
    static uint8_t zeros[64];
    stk_pb_bytes(b, 9, zeros, (size_t)data_bytes);
    if (external) stk_pb_int(b, 14, 1);
    stk_pb_end(b, t);
    stk_pb_end(b, g);
    size_t o = stk_pb_begin(b, 8);
    stk_pb_int(b, 2, 17);
    stk_pb_end(b, o);
}

START_TEST(test_tensor_checks)
{
    stk_pb b;
    stk_onnx_model *m;
    model_with_tensor(&b, 2, 2, 16, false); /* 2x2 floats: right */
    ck_assert_msg(stk_onnx_read(b.data, b.len, "ok.onnx", &m) == STK_OK, "%s", stk_last_error());
    ck_assert_int_eq(m->opset, 17);
    ck_assert_int_eq(m->initializers[0].numel, 4);
    stk_onnx_model_destroy(m);
    stk_pb_deinit(&b);

    model_with_tensor(&b, 2, 2, 12, false); /* a value short */
    ck_assert_int_eq(stk_onnx_read(b.data, b.len, "short.onnx", &m), STK_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(),
                                 "short.onnx: graph.initializer[0]: tensor 'w' has 4 elements of "
                                 "4 bytes but 12 bytes of data"));
    stk_pb_deinit(&b);

    model_with_tensor(&b, 9, 1, 4, false); /* more dimensions than the reader takes */
    ck_assert_int_eq(stk_onnx_read(b.data, b.len, "deep.onnx", &m), STK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "more than 8 dimensions"));
    stk_pb_deinit(&b);

    model_with_tensor(&b, 1, 1, 4, true);
    ck_assert_int_eq(stk_onnx_read(b.data, b.len, "ext.onnx", &m), STK_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "tensor 'w' keeps its data in another file"));
    stk_pb_deinit(&b);

    model_with_tensor(&b, 3, INT64_C(1) << 40, 4, false); /* 2^120 elements */
    ck_assert_int_eq(stk_onnx_read(b.data, b.len, "huge.onnx", &m), STK_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "overflows"));
    stk_pb_deinit(&b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("onnx");
    TCase *t = tcase_create("read");
    tcase_add_test(t, test_reads_pytorch_training_export);
    tcase_add_test(t, test_reads_stoke_export);
    tcase_add_test(t, test_refuses_damaged_and_hostile_files);
    tcase_add_test(t, test_tensor_checks);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return stk_check_run(suite()); }
