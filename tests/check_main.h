/* The main() every Check test program shares: run the suite, exit 1 on any failure. */
#pragma once

#include <check.h>

static inline int stk_check_run(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
