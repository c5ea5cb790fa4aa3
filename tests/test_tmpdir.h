/* A private temporary directory per test run, for the Check programs that
 * write files: created under $STOKE_TEST_TMP (or /tmp), removed after. */
#pragma once

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char test_tmp[512];

/* Create (empty) test_tmp as <base>/<prefix>-<pid>. */
static inline void test_tmpdir_create(const char *prefix)
{
    const char *base = getenv("STOKE_TEST_TMP") ? getenv("STOKE_TEST_TMP") : "/tmp";
    mkdir(base, 0755);
    snprintf(test_tmp, sizeof test_tmp, "%s/%s-%d", base, prefix, (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmp);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(mkdir(test_tmp, 0755), 0);
}

static inline void test_tmpdir_remove(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmp);
    ck_assert_int_eq(system(cmd), 0);
}

/* test_tmp/name; the last four results stay valid. */
static inline const char *tpath(const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", test_tmp, name);
    return buf[k];
}

/* How many entries dir holds (. and .. not counted; 0 when it cannot be read). */
static inline int test_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}
