/* The CUDA backend module's seam (device/cuda_module_impl.h), on the real
 * libstoke_cuda.so of this build (STOKE_CUDA_MODULE_FILE): its one entry
 * point refuses a program from another version or with other table
 * layouts, with a message naming both (the op table's when it is asked
 * for); a matching program gets the table,
 * whose query answers (GPUs, or why none); and a program that loads it on
 * first use gets the same answers through stk_cuda_query. Skipped (77) in
 * builds without the module. */
#include "check_main.h"
#include "common/trace.h"
#include "kernels/backend.h"
#include "device/cuda_module_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static stk_cuda_module_open_fn entry;

static stk_status set_error(stk_status st, const char *message)
{
    return stk_error(st, "%s", message);
}

static stk_cuda_host matching_host(void)
{
    return (stk_cuda_host){.abi = STK_CUDA_MODULE_ABI,
                           .version = STOKE_VERSION,
                           .sizes = STK_CUDA_MODULE_SIZES,
                           .set_error = set_error,
                           .last_error = stk_last_error,
                           .device_alloc = stk_device_alloc,
                           .device_free = stk_device_free,
                           .trace_active = stk_trace_active};
}

START_TEST(test_another_version_is_refused)
{
    stk_cuda_host h = matching_host();
    h.version = "9.9.9";
    const stk_cuda_module *m = (void *)1;
    ck_assert_int_eq(entry(&h, &m), STK_ERR_FORMAT);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(stk_last_error(), "this module is from Stoke " STOKE_VERSION) &&
                      strstr(stk_last_error(), "the program from Stoke 9.9.9"),
                  "%s", stk_last_error());
}
END_TEST

START_TEST(test_other_layouts_are_refused)
{
    stk_cuda_host h = matching_host();
    h.sizes[0] += 8; /* a program whose copy engine has one more entry */
    const stk_cuda_module *m;
    ck_assert_int_eq(entry(&h, &m), STK_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(stk_last_error(), "with other table layouts"));
    h = matching_host();
    h.abi = STK_CUDA_MODULE_ABI + 1;
    ck_assert_int_eq(entry(&h, &m), STK_ERR_FORMAT);
    /* the op table's layout is checked when it is asked for (before any context) */
    h = matching_host();
    ck_assert_int_eq(entry(&h, &m), STK_OK);
    const stk_backend *b = (void *)1;
    ck_assert_int_eq(m->backend(sizeof(stk_backend) + 8, &b), STK_ERR_FORMAT);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(stk_last_error(), "op table has"), "%s", stk_last_error());
}
END_TEST

START_TEST(test_a_matching_program_gets_the_table)
{
    stk_cuda_host h = matching_host();
    const stk_cuda_module *m;
    ck_assert_int_eq(entry(&h, &m), STK_OK);
    ck_assert_ptr_nonnull(m->query);
    ck_assert_ptr_nonnull(m->backend);
    ck_assert_ptr_nonnull(m->context);
    ck_assert_ptr_nonnull(m->heap);
    ck_assert_ptr_nonnull(strstr(m->describe(), "CUDA"));
    stk_cuda_report r;
    m->query(&r);
    ck_assert(r.built);
    ck_assert_int_gt(r.runtime_version, 0);
    ck_assert_msg(r.count > 0 || r.reason[0], "no GPU and no reason");
    /* the host's loader (STOKE_CUDA_MODULE) gives the same answer */
    stk_cuda_report via;
    stk_cuda_query(&via);
    ck_assert(via.built);
    ck_assert_int_eq(via.count, r.count);
    ck_assert_str_eq(via.module, getenv("STOKE_CUDA_MODULE"));
    ck_assert_str_eq(via.backend, m->describe());
}
END_TEST

static Suite *cuda_module_suite(void)
{
    Suite *s = suite_create("cuda_module");
    TCase *tc = tcase_create("seam");
    tcase_add_test(tc, test_another_version_is_refused);
    tcase_add_test(tc, test_other_layouts_are_refused);
    tcase_add_test(tc, test_a_matching_program_gets_the_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *file = getenv("STOKE_CUDA_MODULE_FILE");
    if (!file || !*file) {
        printf("skipped: this build has no CUDA backend module\n");
        return 77;
    }
    setenv("STOKE_CUDA_MODULE", file, 1);
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("%s: %s\n", file, dlerror());
        return 1;
    }
    entry = (stk_cuda_module_open_fn)dlsym(h, STK_CUDA_MODULE_ENTRY);
    if (!entry) {
        printf("%s: no %s\n", file, STK_CUDA_MODULE_ENTRY);
        return 1;
    }
    return stk_check_run(cuda_module_suite());
}
