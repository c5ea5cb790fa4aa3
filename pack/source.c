#include "pack/source.h"

#include "common/fs.h"
#include "common/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

stk_status stk_source_create(stk_source **out, const char *description)
{
    stk_source *s = calloc(1, sizeof *s);
    if (!s || !(s->description = strdup(description))) {
        free(s);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    s->pixels_fd = -1;
    *out = s;
    return STK_OK;
}

stk_status stk_source_add_item(stk_source *src, char *name, char *path, int32_t label,
                               const uint8_t *pixels)
{
    if (src->count == src->items_cap) {
        size_t cap = src->items_cap ? src->items_cap * 2 : 64;
        stk_source_item *items = realloc(src->items, cap * sizeof *items);
        if (!items) {
            free(name);
            free(path);
            return stk_error(STK_ERR_NOMEM, "out of memory listing the source");
        }
        src->items = items;
        src->items_cap = cap;
    }
    src->items[src->count++] = (stk_source_item){name, path, label, pixels, 0};
    return STK_OK;
}

stk_status stk_source_set_numbered_classes(stk_source *src, uint32_t n)
{
    src->class_names = calloc(n ? n : 1, sizeof *src->class_names);
    if (!src->class_names) return stk_error(STK_ERR_NOMEM, "out of memory");
    src->num_classes = n;
    for (uint32_t i = 0; i < n; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%u", i);
        if (!(src->class_names[i] = strdup(buf))) return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    return STK_OK;
}

stk_status stk_source_load_class_names(stk_source *src, const char *file)
{
    uint8_t *data;
    size_t len;
    stk_status st = stk_file_read_all(file, 64u << 20, &data, &len);
    if (st != STK_OK) return stk_error_prefix(st, "%s", file);
    char **names = NULL;
    uint32_t n = 0, cap = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && data[i] != '\n') continue;
        size_t end = i;
        if (end > start && data[end - 1] == '\r') end--;
        if (end > start || i < len) { /* a trailing newline does not add a class */
            if (end == start) {
                st = stk_error(STK_ERR_INVALID_ARG, "%s: line %u is empty", file, n + 1);
                goto out;
            }
            if (!stk_utf8_valid((char *)data + start, end - start)) {
                st = stk_error(STK_ERR_INVALID_ARG, "%s: line %u is not valid UTF-8", file, n + 1);
                goto out;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                char **grown = realloc(names, cap * sizeof *names);
                if (!grown) {
                    st = stk_error(STK_ERR_NOMEM, "out of memory");
                    goto out;
                }
                names = grown;
            }
            if (!(names[n] = strndup((char *)data + start, end - start))) {
                st = stk_error(STK_ERR_NOMEM, "out of memory");
                goto out;
            }
            n++;
        }
        start = i + 1;
    }
    int32_t max_label = -1;
    for (size_t i = 0; i < src->count; i++)
        if (src->items[i].label > max_label) max_label = src->items[i].label;
    if ((int64_t)max_label >= (int64_t)n) {
        st = stk_error(STK_ERR_INVALID_ARG, "%s names %u classes, but the data has label %d", file,
                       n, max_label);
        goto out;
    }
    for (uint32_t i = 0; i < src->num_classes; i++) free(src->class_names[i]);
    free(src->class_names);
    src->class_names = names;
    src->num_classes = n;
    names = NULL;
out:
    for (uint32_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(data);
    return st;
}

void stk_source_shuffle(stk_source *src, uint64_t seed)
{
    stk_rng r;
    stk_rng_init(&r, seed, 0x5041434B /* "PACK" */, 0);
    for (size_t i = src->count; i > 1; i--) {
        size_t j = (size_t)stk_rng_below64(&r, i);
        stk_source_item t = src->items[i - 1];
        src->items[i - 1] = src->items[j];
        src->items[j] = t;
    }
}

stk_status stk_source_read_pixels(const stk_source *src, const stk_source_item *it, uint8_t *buf)
{
    size_t n = (size_t)src->width * src->height * src->channels;
    if (it->pixels) {
        memcpy(buf, it->pixels, n);
        return STK_OK;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(src->pixels_fd, buf + got, n - got, (off_t)(it->offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return stk_error(STK_ERR_IO, "%s: read error at offset %llu: %s", src->pixels_path,
                             (unsigned long long)(it->offset + got), strerror(errno));
        if (r == 0)
            return stk_error(STK_ERR_CORRUPT, "%s: truncated since it was opened (offset %llu)",
                             src->pixels_path, (unsigned long long)(it->offset + got));
        got += (size_t)r;
    }
    return STK_OK;
}

void stk_source_destroy(stk_source *src)
{
    if (!src) return;
    for (size_t i = 0; i < src->count; i++) {
        free(src->items[i].name);
        free(src->items[i].path);
    }
    for (uint32_t i = 0; src->class_names && i < src->num_classes; i++) free(src->class_names[i]);
    free(src->class_names);
    free(src->items);
    free(src->description);
    free(src->pixels);
    if (src->pixels_fd >= 0) close(src->pixels_fd);
    free(src->pixels_path);
    free(src);
}
