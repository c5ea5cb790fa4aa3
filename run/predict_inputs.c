/* What a prediction classifies (predict_inputs_impl.h). */
#include "run/predict_inputs_impl.h"

#include "common/text.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static bool image_name(const char *name)
{
    static const char *exts[] = {".jpg",  ".jpeg", ".jpe", ".jfif", ".png",
                                 ".webp", ".bmp",  ".ppm", ".pgm"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof exts / sizeof *exts; i++)
        if (!strcasecmp(dot, exts[i])) return true;
    return false;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && !strcmp(s + n - k, suffix);
}

/* Take path (malloc'd) as the next item; why: it fails with that (copied). */
static stk_status push(predict_inputs *in, char *path, int dataset, uint64_t record,
                       const char *why)
{
    if (!path) return stk_error(STK_ERR_NOMEM, "out of memory");
    if (in->n == in->cap) {
        uint64_t cap = in->cap ? 2 * in->cap : 256;
        predict_item *v = realloc(in->items, cap * sizeof *v);
        if (!v) {
            free(path);
            return stk_error(STK_ERR_NOMEM, "out of memory");
        }
        in->items = v;
        in->cap = cap;
    }
    predict_item *it = &in->items[in->n++];
    *it = (predict_item){.path = path, .dataset = dataset, .record = record};
    if (why && !(it->why = strdup(why))) return stk_error(STK_ERR_NOMEM, "out of memory");
    return STK_OK;
}

static stk_status walk(predict_inputs *in, const char *dir, int depth)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        char why[256];
        snprintf(why, sizeof why, "cannot list the folder: %s", strerror(errno));
        return push(in, strdup(dir), -1, 0, why);
    }
    stk_status st = STK_OK;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (st == STK_OK && name[0] != '.') { /* ., .., hidden files */
            char *path = stk_text_printf("%s/%s", dir, name);
            struct stat sb;
            if (!path) {
                st = stk_error(STK_ERR_NOMEM, "out of memory");
            } else if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && depth < 64) {
                st = walk(in, path, depth + 1); /* real folders only: no symlink loops */
                free(path);
            } else if (image_name(name)) {
                st = push(in, path, -1, 0, NULL);
            } else {
                in->not_images++;
                free(path);
            }
        }
        free(names[i]);
    }
    free(names);
    return st;
}

/* The dataset at path, opened once however often it is named (LMDB opens a
 * file once a process); *k its index, -1 when it cannot be opened (the
 * message is then stk_last_error()). Errors: NOMEM. */
static stk_status dataset_of(predict_inputs *in, const char *path, int *k)
{
    *k = -1;
    for (int i = 0; i < in->n_datasets; i++)
        if (!strcmp(in->dataset_paths[i], path)) {
            *k = i;
            return STK_OK;
        }
    stk_dataset *ds;
    if (stk_dataset_open(path, &ds) != STK_OK) return STK_OK;
    stk_dataset **v = realloc(in->datasets, (size_t)(in->n_datasets + 1) * sizeof *v);
    if (v) in->datasets = v;
    char **p = v ? realloc(in->dataset_paths, (size_t)(in->n_datasets + 1) * sizeof *p) : NULL;
    if (p) in->dataset_paths = p;
    char *copy = p ? strdup(path) : NULL;
    if (!copy) {
        stk_dataset_close(ds);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    in->datasets[in->n_datasets] = ds;
    in->dataset_paths[in->n_datasets] = copy;
    *k = in->n_datasets++;
    return STK_OK;
}

/* Records [first, first + count) of the dataset at path (count UINT64_MAX:
 * all of them), each "PATH#INDEX". */
static stk_status add_records(predict_inputs *in, const char *path, uint64_t first, uint64_t count)
{
    int k;
    STK_TRY(dataset_of(in, path, &k));
    if (k < 0) return push(in, strdup(path), -1, 0, stk_last_error());
    uint64_t n = stk_dataset_count(in->datasets[k]);
    if (count != UINT64_MAX && first >= n) {
        char why[160];
        snprintf(why, sizeof why, "no record %llu: the dataset has %llu (0..%llu)",
                 (unsigned long long)first, (unsigned long long)n,
                 (unsigned long long)(n ? n - 1 : 0));
        return push(in, stk_text_printf("%s#%llu", path, (unsigned long long)first), -1, 0, why);
    }
    uint64_t end = count == UINT64_MAX ? n : first + count;
    for (uint64_t r = first; r < end; r++)
        STK_TRY(push(in, stk_text_printf("%s#%llu", path, (unsigned long long)r), k, r, NULL));
    return STK_OK;
}

/* "FILE.stoke#INDEX" (as predict names a record): *file (malloc'd) and
 * *index; false when arg is not one. */
static bool record_name(const char *arg, char **file, uint64_t *index)
{
    const char *hash = strrchr(arg, '#');
    if (!hash || hash == arg || !hash[1]) return false;
    for (const char *c = hash + 1; *c; c++)
        if (*c < '0' || *c > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(hash + 1, &end, 10);
    if (errno || *end) return false;
    char *f = strndup(arg, (size_t)(hash - arg));
    if (!f) return false;
    if (!ends_with(f, ".stoke")) {
        free(f);
        return false;
    }
    *file = f;
    *index = v;
    return true;
}

stk_status predict_inputs_add(predict_inputs *in, const char *arg)
{
    struct stat sb;
    if (stat(arg, &sb) != 0) {
        int err = errno;
        char *file;
        uint64_t index;
        if (err == ENOENT && record_name(arg, &file, &index)) {
            stk_status st = stat(file, &sb) == 0 && !S_ISDIR(sb.st_mode)
                                ? add_records(in, file, index, 1)
                                : push(in, strdup(arg), -1, 0,
                                       "cannot open: no such file, "
                                       "and no such dataset");
            free(file);
            return st;
        }
        char why[256];
        snprintf(why, sizeof why, "cannot open: %s", strerror(err));
        return push(in, strdup(arg), -1, 0, why);
    }
    if (S_ISDIR(sb.st_mode)) return walk(in, arg, 0);
    if (ends_with(arg, ".stoke")) return add_records(in, arg, 0, UINT64_MAX);
    return push(in, strdup(arg), -1, 0, NULL);
}

void predict_inputs_free(predict_inputs *in)
{
    for (uint64_t i = 0; i < in->n; i++) {
        free(in->items[i].path);
        free(in->items[i].why);
    }
    free(in->items);
    for (int i = 0; i < in->n_datasets; i++) {
        stk_dataset_close(in->datasets[i]);
        free(in->dataset_paths[i]);
    }
    free(in->datasets);
    free(in->dataset_paths);
    memset(in, 0, sizeof *in);
}
