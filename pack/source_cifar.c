/* CIFAR-10 binary version (https://www.cs.toronto.edu/~kriz/cifar.html):
 * each record is 1 label byte then 3072 pixel bytes, the red plane (32x32,
 * row-major), then green, then blue. Stored by Stoke as HWC u8. */
#include "pack/source.h"

#include "common/fs.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_SIDE   32
#define CIFAR_PIXELS (CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD (1 + 3 * CIFAR_PIXELS)

static const char *cifar10_names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                        "dog",      "frog",       "horse", "ship", "truck"};

/* Append every record of one batch file. */
static stk_status add_batch(stk_source *src, const char *path)
{
    uint8_t *data;
    size_t len;
    stk_status st = stk_file_read_all(path, (uint64_t)1 << 32, &data, &len);
    if (st != STK_OK) return stk_error_prefix(st, "%s", path);
    if (len == 0 || len % CIFAR_RECORD != 0) {
        free(data);
        return stk_error(STK_ERR_FORMAT,
                         "%s: %zu bytes is not a whole number of CIFAR-10 records (%d bytes each)",
                         path, len, CIFAR_RECORD);
    }
    size_t n = len / CIFAR_RECORD, old = src->count;
    uint8_t *pixels = realloc(src->pixels, (old + n) * 3 * CIFAR_PIXELS);
    if (!pixels) {
        free(data);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    src->pixels = pixels;
    char *copy = strdup(path);
    const char *base = copy ? basename(copy) : "cifar";
    for (size_t i = 0; i < n && st == STK_OK; i++) {
        const uint8_t *rec = data + i * CIFAR_RECORD;
        if (rec[0] > 9) {
            st = stk_error(STK_ERR_FORMAT, "%s: record %zu has label %u (CIFAR-10 has 0..9)", path,
                           i, rec[0]);
            break;
        }
        uint8_t *dst = src->pixels + (old + i) * 3 * CIFAR_PIXELS;
        for (int p = 0; p < CIFAR_PIXELS; p++)
            for (int c = 0; c < 3; c++) dst[3 * p + c] = rec[1 + c * CIFAR_PIXELS + p];
        char name[300];
        snprintf(name, sizeof name, "%s#%zu", base, i);
        /* Pixel pointers are fixed up after the last realloc (see below). */
        st = stk_source_add_item(src, strdup(name), NULL, rec[0], NULL);
        if (st == STK_OK && !src->items[src->count - 1].name)
            st = stk_error(STK_ERR_NOMEM, "out of memory");
    }
    free(copy);
    free(data);
    return st;
}

static stk_status load_meta_names(stk_source *src, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/batches.meta.txt", dir);
    struct stat sb;
    if (stat(path, &sb) == 0) return stk_source_load_class_names(src, path);
    src->class_names = calloc(10, sizeof *src->class_names);
    if (!src->class_names) return stk_error(STK_ERR_NOMEM, "out of memory");
    src->num_classes = 10;
    for (int i = 0; i < 10; i++)
        if (!(src->class_names[i] = strdup(cifar10_names[i])))
            return stk_error(STK_ERR_NOMEM, "out of memory");
    return STK_OK;
}

stk_status stk_source_open_cifar10(const char *dir, const char *split, stk_source **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0) return stk_error(STK_ERR_IO, "%s: %s", dir, strerror(errno));
    bool train = !split || strcmp(split, "train") == 0;
    if (split && !train && strcmp(split, "test") != 0)
        return stk_error(STK_ERR_INVALID_ARG, "--split %s: expected train or test", split);
    char desc[4200];
    snprintf(desc, sizeof desc, "cifar10:%s", dir);
    stk_source *src;
    stk_status st = stk_source_create(&src, desc);
    if (st != STK_OK) return st;
    src->encoding = STK_ENCODING_RAW_U8;
    src->width = src->height = CIFAR_SIDE;
    src->channels = 3;
    char *dir_copy = NULL;
    const char *meta_dir = dir;
    if (S_ISDIR(sb.st_mode)) {
        for (int b = train ? 1 : 0; b <= (train ? 5 : 0) && st == STK_OK; b++) {
            char path[4200];
            if (train)
                snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b);
            else
                snprintf(path, sizeof path, "%s/test_batch.bin", dir);
            st = add_batch(src, path);
        }
    } else {
        st = add_batch(src, dir);
        dir_copy = strdup(dir);
        meta_dir = dir_copy ? dirname(dir_copy) : ".";
    }
    if (st == STK_OK) {
        for (size_t i = 0; i < src->count; i++)
            src->items[i].pixels = src->pixels + i * 3 * CIFAR_PIXELS;
        st = load_meta_names(src, meta_dir);
    }
    free(dir_copy);
    if (st != STK_OK) {
        stk_source_destroy(src);
        return st;
    }
    *out = src;
    return STK_OK;
}
