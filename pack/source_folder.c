/* The imagefolder and list sources: JPEG files named by path. */
#include "pack/source.h"

#include "common/fs.h"
#include "common/log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Extensions listed from a folder. Non-JPEG image types are listed so that
 * pack names them as bad input rather than dropping them without a word. */
static bool is_image_name(const char *name)
{
    static const char *exts[] = {".jpg",  ".jpeg", ".jpe", ".jfif", ".png", ".gif",
                                 ".webp", ".bmp",  ".tif", ".tiff", ".ppm", ".pgm"};
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (strcasecmp(dot, exts[i]) == 0) return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static stk_status list_push(name_list *l, char *s)
{
    if (!s) return stk_error(STK_ERR_NOMEM, "out of memory");
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return stk_error(STK_ERR_NOMEM, "out of memory");
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return STK_OK;
}

static void list_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* Collect image files under root/rel (rel "" for root) as paths relative to
 * root. Real subdirectories are walked; symlinked directories are not (no
 * loops). A symlink that cannot be followed is listed when its name looks
 * like an image, so pack reports why it cannot be read. */
static stk_status walk(const char *root, const char *rel, int depth, name_list *out)
{
    char *dir_path = rel[0] ? join(root, rel) : strdup(root);
    if (!dir_path) return stk_error(STK_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir_path);
    if (!d) {
        stk_status st = stk_error(STK_ERR_IO, "%s: cannot list: %s", dir_path, strerror(errno));
        free(dir_path);
        return st;
    }
    stk_status st = STK_OK;
    struct dirent *e;
    while (st == STK_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue; /* ., .., hidden files */
        char *child_rel = rel[0] ? join(rel, e->d_name) : strdup(e->d_name);
        if (!child_rel) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            break;
        }
        char *full = join(root, child_rel);
        struct stat sb;
        int is_dir = 0;
        if (full && lstat(full, &sb) == 0 && S_ISDIR(sb.st_mode)) is_dir = 1;
        free(full);
        if (is_dir && depth < 64) {
            st = walk(root, child_rel, depth + 1, out);
            free(child_rel);
        } else if (!is_dir && is_image_name(e->d_name)) {
            st = list_push(out, child_rel);
        } else {
            stk_log_debug("%s/%s: not an image name, ignored", root, child_rel);
            free(child_rel);
        }
    }
    closedir(d);
    free(dir_path);
    return st;
}

stk_status stk_source_open_folder(const char *dir, stk_source **out)
{
    *out = NULL;
    char desc[4200];
    snprintf(desc, sizeof desc, "imagefolder:%s", dir);
    stk_source *src;
    stk_status st = stk_source_create(&src, desc);
    if (st != STK_OK) return st;
    src->encoding = STK_ENCODING_JPEG;
    name_list classes = {0}, files = {0};
    DIR *d = opendir(dir);
    if (!d) {
        st = stk_error(STK_ERR_IO, "%s: cannot open folder: %s", dir, strerror(errno));
        goto fail;
    }
    struct dirent *e;
    size_t loose = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *full = join(dir, e->d_name);
        struct stat sb;
        bool is_dir = full && stat(full, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(full);
        if (!is_dir) {
            loose++;
            continue;
        }
        if ((st = list_push(&classes, strdup(e->d_name)))) break;
    }
    closedir(d);
    if (st != STK_OK) goto fail;
    if (classes.n == 0) {
        st = stk_error(STK_ERR_FORMAT, "%s: no class subfolders (expected %s/<class>/<image>.jpg)",
                       dir, dir);
        goto fail;
    }
    if (classes.n > STK_MAX_CLASSES) {
        st = stk_error(STK_ERR_LIMIT, "%s: %zu class subfolders (a dataset holds at most %u)", dir,
                       classes.n, STK_MAX_CLASSES);
        goto fail;
    }
    if (loose) stk_log_warn("%s: %zu entries outside class subfolders are ignored", dir, loose);
    qsort(classes.v, classes.n, sizeof *classes.v, cmp_str);
    for (size_t c = 0; c < classes.n; c++) {
        const char *cls = classes.v[c];
        if (!stk_utf8_valid(cls, strlen(cls))) {
            char buf[512];
            st =
                stk_error(STK_ERR_FORMAT, "%s/%s: class folder name is not valid UTF-8 (rename it)",
                          dir, stk_printable(cls, buf, sizeof buf));
            goto fail;
        }
        if ((st = walk(dir, cls, 0, &files))) goto fail;
        if (files.n == 0)
            stk_log_warn("%s/%s: class folder has no images (label %zu is kept)", dir, cls, c);
        if (files.n > 1) qsort(files.v, files.n, sizeof *files.v, cmp_str);
        for (size_t i = 0; i < files.n; i++) {
            char *path = join(dir, files.v[i]);
            st = stk_source_add_item(src, files.v[i], path, (int32_t)c, NULL);
            files.v[i] = NULL;
            if (st == STK_OK && !path) st = stk_error(STK_ERR_NOMEM, "out of memory");
            if (st != STK_OK) goto fail;
        }
        list_free(&files);
    }
    src->class_names = classes.v;
    src->num_classes = (uint32_t)classes.n;
    classes.v = NULL;
    classes.n = 0;
    list_free(&files);
    *out = src;
    return STK_OK;
fail:
    list_free(&classes);
    list_free(&files);
    stk_source_destroy(src);
    return st;
}

stk_status stk_source_open_list(const char *list_file, stk_source **out)
{
    *out = NULL;
    char desc[4200];
    snprintf(desc, sizeof desc, "list:%s", list_file);
    uint8_t *data;
    size_t len;
    stk_status st = stk_file_read_all(list_file, (uint64_t)1 << 32, &data, &len);
    if (st != STK_OK) return stk_error_prefix(st, "%s", list_file);
    stk_source *src;
    if ((st = stk_source_create(&src, desc))) {
        free(data);
        return st;
    }
    src->encoding = STK_ENCODING_JPEG;
    char *copy = strdup(list_file);
    const char *base = copy ? dirname(copy) : ".";
    int32_t max_label = -1;
    size_t line_no = 0, start = 0;
    for (size_t i = 0; i <= len && st == STK_OK; i++) {
        if (i < len && data[i] != '\n') continue;
        line_no++;
        size_t end = i;
        char *line = (char *)data + start;
        start = i + 1;
        while (end > (size_t)(line - (char *)data) && isspace(data[end - 1])) end--;
        size_t n = end - (size_t)(line - (char *)data);
        while (n && isspace((unsigned char)*line)) line++, n--;
        if (n == 0 || line[0] == '#') continue;
        if (memchr(line, '\0', n)) {
            st = stk_error(STK_ERR_INVALID_ARG, "%s:%zu: a NUL byte inside the line", list_file,
                           line_no);
            break;
        }
        /* The label is the last field, so paths may contain spaces. */
        size_t sp = n;
        while (sp > 0 && !isspace((unsigned char)line[sp - 1])) sp--;
        char *endp;
        char label_text[32];
        size_t llen = n - sp;
        if (sp == 0 || llen == 0 || llen >= sizeof label_text) {
            st = stk_error(STK_ERR_INVALID_ARG, "%s:%zu: expected \"path label\"", list_file,
                           line_no);
            break;
        }
        memcpy(label_text, line + sp, llen);
        label_text[llen] = '\0';
        errno = 0;
        long label = strtol(label_text, &endp, 10);
        if (*endp || errno || label < 0) {
            st =
                stk_error(STK_ERR_INVALID_ARG, "%s:%zu: label \"%s\" is not a non-negative integer",
                          list_file, line_no, label_text);
            break;
        }
        if (label >= (long)STK_MAX_CLASSES) { /* what a dataset can hold and every reader opens */
            st = stk_error(STK_ERR_LIMIT, "%s:%zu: label %ld: labels are limited to 0..%u",
                           list_file, line_no, label, STK_MAX_CLASSES - 1);
            break;
        }
        size_t plen = sp;
        while (plen && isspace((unsigned char)line[plen - 1])) plen--;
        char *name = strndup(line, plen);
        char *path = name ? (name[0] == '/' ? strdup(name) : join(base, name)) : NULL;
        if (!name || !path) {
            free(name);
            free(path);
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            break;
        }
        st = stk_source_add_item(src, name, path, (int32_t)label, NULL);
        if (label > max_label) max_label = (int32_t)label;
    }
    free(copy);
    free(data);
    if (st == STK_OK && src->count == 0)
        st = stk_error(STK_ERR_INVALID_ARG, "%s: lists no images", list_file);
    if (st == STK_OK) st = stk_source_set_numbered_classes(src, (uint32_t)(max_label + 1));
    if (st != STK_OK) {
        stk_source_destroy(src);
        return st;
    }
    *out = src;
    return STK_OK;
}

/* The split names a folder of splits may hold, and what --split calls them. */
static const struct {
    const char *folder, *split;
} split_folders[] = {
    {"train", "train"}, {"val", "val"}, {"valid", "val"}, {"validation", "val"}, {"test", "test"}};
#define N_SPLIT_FOLDERS (sizeof split_folders / sizeof split_folders[0])

/* Which split folders dir holds (found[i] for split_folders[i]); whether its
 * subfolders are splits: some are, and none is anything else. */
static bool is_split_layout(const char *dir, bool *found)
{
    DIR *d = opendir(dir);
    if (!d) return false;
    size_t splits = 0, others = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *full = join(dir, e->d_name);
        struct stat sb;
        bool sub = full && stat(full, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(full);
        if (!sub) continue;
        size_t i = 0;
        while (i < N_SPLIT_FOLDERS && strcmp(e->d_name, split_folders[i].folder)) i++;
        if (i < N_SPLIT_FOLDERS)
            found[i] = true, splits++;
        else
            others++;
    }
    closedir(d);
    return splits > 0 && others == 0;
}

stk_status stk_source_open_folder_split(const char *dir, const char *split, stk_source **out)
{
    *out = NULL;
    bool found[N_SPLIT_FOLDERS] = {false};
    if (!is_split_layout(dir, found)) {
        if (split)
            return stk_error(STK_ERR_INVALID_ARG,
                             "--split %s: %s holds class folders, not train/val/test folders",
                             split, dir);
        return stk_source_open_folder(dir, out);
    }
    char names[128] = "";
    for (size_t i = 0; i < N_SPLIT_FOLDERS; i++) {
        if (!found[i]) continue;
        if (split && !strcmp(split, split_folders[i].split)) {
            char *sub = join(dir, split_folders[i].folder);
            if (!sub) return stk_error(STK_ERR_NOMEM, "out of memory");
            stk_status st = stk_source_open_folder(sub, out);
            free(sub);
            return st;
        }
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s/", n ? ", " : "", split_folders[i].folder);
    }
    if (split)
        return stk_error(STK_ERR_INVALID_ARG, "--split %s: %s has no such folder (it holds %s)",
                         split, dir, names);
    return stk_error(STK_ERR_INVALID_ARG,
                     "%s: its folders %s are splits, not classes: pack one with --split train "
                     "(or val, test)",
                     dir, names);
}
