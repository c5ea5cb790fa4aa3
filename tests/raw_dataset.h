/* A small raw dataset for the tests that train (test_fit, test_run):
 * `images` gray side x side images in 3 classes ("a", "b", "c"), record i
 * of class i % 3, pixels a fixed function of i. */
#pragma once

#include "storage/writer.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

static inline void make_raw_dataset(const char *path, int images, int side)
{
    stk_writer *w;
    ck_assert_int_eq(stk_writer_open(path, &w), STK_OK);
    stk_meta m = {.encoding = STK_ENCODING_RAW_U8,
                  .channels = 1,
                  .min_width = side,
                  .max_width = side,
                  .min_height = side,
                  .max_height = side};
    char *names[] = {"a", "b", "c"};
    ck_assert_int_eq(stk_meta_set_classes(&m, names, 3), STK_OK);
    ck_assert(side <= 64);
    for (int i = 0; i < images; i++) {
        uint8_t px[64 * 64];
        for (int k = 0; k < side * side; k++)
            px[k] = (uint8_t)((i * 37 + k * 11 + (i % 3) * 60) & 255);
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        stk_record r = {.encoding = STK_ENCODING_RAW_U8,
                        .channels = 1,
                        .width = side,
                        .height = side,
                        .label = i % 3,
                        .name = name,
                        .name_len = (uint32_t)strlen(name),
                        .payload = px,
                        .payload_len = (uint32_t)(side * side)};
        ck_assert_int_eq(stk_writer_put(w, &r), STK_OK);
        m.class_counts[i % 3]++;
    }
    ck_assert_int_eq(stk_writer_finish(w, &m, NULL), STK_OK);
    stk_writer_close(w);
    stk_meta_deinit(&m);
}
