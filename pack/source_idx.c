/* MNIST / Fashion-MNIST IDX files (http://yann.lecun.com/exdb/mnist/ layout):
 * a big-endian header (0, 0, type 0x08 = u8, number of dims; then each dim as
 * u32) and the data. zlib's gzread reads gzipped and plain files alike. */
#include "pack/source.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAX_BYTES ((uint64_t)16 << 30)

static stk_status gz_read_exact(gzFile f, const char *path, void *buf, uint64_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        int n = gzread(f, p, chunk);
        if (n < 0) {
            int err;
            const char *msg = gzerror(f, &err);
            return stk_error(err == Z_ERRNO ? STK_ERR_IO : STK_ERR_CORRUPT, "%s: %s", path,
                             err == Z_ERRNO ? strerror(errno) : msg);
        }
        if (n == 0)
            return stk_error(STK_ERR_CORRUPT, "%s: truncated (%llu bytes missing)", path,
                             (unsigned long long)len);
        p += n;
        len -= (uint64_t)n;
    }
    return STK_OK;
}

/* An IDX header's magic: u8 data with ndims dimensions. */
static stk_status check_magic(const char *path, const uint8_t head[4], int ndims)
{
    if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != ndims)
        return stk_error(STK_ERR_FORMAT,
                         "%s: not an IDX u8 file with %d dimension%s (magic %02x %02x %02x %02x)",
                         path, ndims, ndims > 1 ? "s" : "", head[0], head[1], head[2], head[3]);
    return STK_OK;
}

/* Check an IDX header: its magic and the dimensions into dims[]; *total gets
 * the body's size. */
static stk_status check_header(const char *path, const uint8_t head[4], const uint8_t *dimbuf,
                               int ndims, uint32_t *dims, uint64_t *total)
{
    STK_TRY(check_magic(path, head, ndims));
    *total = 1;
    for (int i = 0; i < ndims; i++) {
        const uint8_t *b = dimbuf + 4 * i;
        dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (__builtin_mul_overflow(*total, (uint64_t)dims[i], total) || *total > IDX_MAX_BYTES)
            return stk_error(STK_ERR_LIMIT, "%s: IDX header says more than 16 GiB of data", path);
    }
    return STK_OK;
}

/* Open `path` for reading: a regular file only (O_NONBLOCK: a FIFO is
 * refused, not waited on for a writer). */
static stk_status open_regular(const char *path, int *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return stk_error(STK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return stk_error(STK_ERR_UNSUPPORTED, "%s: not a regular file", path);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *out = fd;
    return STK_OK;
}

/* The header through gz (gzipped or plain alike); f stays at the body. */
static stk_status read_gz_header(gzFile f, const char *path, int ndims, uint32_t *dims,
                                 uint64_t *total)
{
    uint8_t head[4], dimbuf[12];
    STK_TRY(gz_read_exact(f, path, head, 4));
    STK_TRY(check_magic(path, head, ndims)); /* another kind of file before a truncated one */
    STK_TRY(gz_read_exact(f, path, dimbuf, 4u * (unsigned)ndims));
    return check_header(path, head, dimbuf, ndims, dims, total);
}

/* Read an IDX file of u8 with `ndims` dimensions; dims[] and a malloc'd body. */
static stk_status read_idx(const char *path, int ndims, uint32_t *dims, uint8_t **body)
{
    *body = NULL;
    int fd;
    STK_TRY(open_regular(path, &fd));
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return stk_error(STK_ERR_NOMEM, "%s: out of memory", path);
    }
    uint64_t total;
    stk_status st = read_gz_header(f, path, ndims, dims, &total);
    if (st != STK_OK) goto out;
    *body = malloc(total ? total : 1);
    if (!*body) {
        st = stk_error(STK_ERR_NOMEM, "%s: out of memory for %llu bytes", path,
                       (unsigned long long)total);
        goto out;
    }
    st = gz_read_exact(f, path, *body, total);
out:
    gzclose(f);
    if (st != STK_OK) {
        free(*body);
        *body = NULL;
    }
    return st;
}

/* The images' body as a file that pack reads item by item: a plain IDX file
 * itself (its body follows the header), or a gzipped one's body decompressed
 * into an unlinked temporary file (gzip cannot seek, and --shuffle reads the
 * items in any order). Memory stays flat however many images there are. */
static stk_status open_images(const char *path, uint32_t dims[3], int *fd_out, uint64_t *offset)
{
    int fd;
    STK_TRY(open_regular(path, &fd));
    uint8_t magic[2] = {0};
    uint64_t total;
    stk_status st = STK_OK;
    if (pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        gzFile f = gzdopen(fd, "rb");
        if (!f) {
            close(fd);
            return stk_error(STK_ERR_NOMEM, "%s: out of memory", path);
        }
        FILE *tmp = NULL;
        if ((st = read_gz_header(f, path, 3, dims, &total)) == STK_OK && !(tmp = tmpfile()))
            st = stk_error(STK_ERR_IO, "%s: cannot make a temporary file for its body: %s", path,
                           strerror(errno));
        static uint8_t unused;
        uint8_t *buf = st == STK_OK ? malloc(1u << 20) : &unused;
        if (!buf) st = stk_error(STK_ERR_NOMEM, "out of memory");
        for (uint64_t left = total; st == STK_OK && left > 0;) {
            unsigned n = left < (1u << 20) ? (unsigned)left : (1u << 20);
            if ((st = gz_read_exact(f, path, buf, n)) == STK_OK && fwrite(buf, 1, n, tmp) != n)
                st = stk_error(STK_ERR_IO, "%s: cannot write its decompressed body: %s", path,
                               strerror(errno));
            left -= n;
        }
        if (buf != &unused) free(buf);
        gzclose(f);
        if (st == STK_OK && fflush(tmp) != 0)
            st = stk_error(STK_ERR_IO, "%s: cannot write its decompressed body: %s", path,
                           strerror(errno));
        int tfd = st == STK_OK ? dup(fileno(tmp)) : -1;
        if (st == STK_OK && tfd < 0) st = stk_error(STK_ERR_IO, "dup: %s", strerror(errno));
        if (tmp) fclose(tmp);
        *fd_out = tfd;
        *offset = 0;
        return st;
    }
    uint8_t head[16] = {0};
    struct stat sb;
    ssize_t got = pread(fd, head, sizeof head, 0);
    if (got < 0 || fstat(fd, &sb) != 0) st = stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    if (st == STK_OK && got >= 4) /* another kind of file before a truncated one */
        st = check_magic(path, head, 3);
    if (st == STK_OK && got < 16)
        st = stk_error(STK_ERR_CORRUPT, "%s: truncated (%zd bytes)", path, got);
    if (st == STK_OK) st = check_header(path, head, head + 4, 3, dims, &total);
    if (st == STK_OK && (uint64_t)sb.st_size < 16 + total)
        st = stk_error(STK_ERR_CORRUPT, "%s: truncated (%llu bytes missing)", path,
                       (unsigned long long)(16 + total - (uint64_t)sb.st_size));
    if (st != STK_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    *offset = 16;
    return STK_OK;
}

static char *find_file(const char *dir, const char *stem)
{
    static const char *suffix[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(dir) + strlen(stem) + 8;
        char *p = malloc(n);
        if (!p) return NULL;
        snprintf(p, n, "%s/%s%s", dir, stem, suffix[i]);
        struct stat sb;
        if (stat(p, &sb) == 0) return p;
        free(p);
    }
    return NULL;
}

stk_status stk_source_open_idx(const char *images, const char *labels, const char *split,
                               stk_source **out)
{
    *out = NULL;
    char *img_path = NULL, *lbl_path = NULL;
    uint8_t *label_data = NULL;
    stk_source *src = NULL;
    stk_status st;
    struct stat sb;
    if (stat(images, &sb) != 0) return stk_error(STK_ERR_IO, "%s: %s", images, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        if (labels)
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s: a labels file goes with an images file, not a folder", images);
        const char *prefix = !split || strcmp(split, "train") == 0                        ? "train"
                             : (strcmp(split, "test") == 0 || strcmp(split, "t10k") == 0) ? "t10k"
                                                                                          : NULL;
        if (!prefix)
            return stk_error(STK_ERR_INVALID_ARG, "--split %s: expected train or test", split);
        char stem[64];
        snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", prefix);
        img_path = find_file(images, stem);
        snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", prefix);
        lbl_path = find_file(images, stem);
        if (!img_path || !lbl_path) {
            st = stk_error(STK_ERR_FORMAT,
                           "%s: no %s-images-idx3-ubyte[.gz] and %s-labels-idx1-ubyte[.gz] in it",
                           images, prefix, prefix);
            goto out;
        }
    } else {
        if (!labels)
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s: an IDX images file needs its labels file too", images);
        img_path = strdup(images);
        lbl_path = strdup(labels);
        if (!img_path || !lbl_path) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    char desc[8400];
    snprintf(desc, sizeof desc, "idx:%s", img_path);
    if ((st = stk_source_create(&src, desc))) goto out;
    uint32_t idims[3], ldims[1];
    uint64_t body;
    if ((st = open_images(img_path, idims, &src->pixels_fd, &body))) goto out;
    if (!(src->pixels_path = strdup(img_path))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = read_idx(lbl_path, 1, ldims, &label_data))) goto out;
    if (idims[0] != ldims[0]) {
        st = stk_error(STK_ERR_FORMAT, "%s has %u images but %s has %u labels", img_path, idims[0],
                       lbl_path, ldims[0]);
        goto out;
    }
    if (idims[1] == 0 || idims[2] == 0) {
        st = stk_error(STK_ERR_FORMAT, "%s: images of %ux%u pixels", img_path, idims[2], idims[1]);
        goto out;
    }
    src->encoding = STK_ENCODING_RAW_U8;
    src->height = idims[1];
    src->width = idims[2];
    src->channels = 1;
    char *base_copy = strdup(img_path);
    const char *base = base_copy ? basename(base_copy) : "idx";
    uint8_t max_label = 0;
    size_t per = (size_t)idims[1] * idims[2];
    for (uint32_t i = 0; i < idims[0] && st == STK_OK; i++) {
        char name[300];
        snprintf(name, sizeof name, "%s#%u", base, i);
        if (label_data[i] > max_label) max_label = label_data[i];
        st = stk_source_add_item(src, strdup(name), NULL, label_data[i], NULL);
        if (st == STK_OK && !src->items[src->count - 1].name)
            st = stk_error(STK_ERR_NOMEM, "out of memory");
        if (st == STK_OK) src->items[src->count - 1].offset = body + per * i;
    }
    free(base_copy);
    if (st == STK_OK)
        st = stk_source_set_numbered_classes(src, idims[0] ? (uint32_t)max_label + 1 : 0);
out:
    free(img_path);
    free(lbl_path);
    free(label_data);
    if (st != STK_OK)
        stk_source_destroy(src);
    else
        *out = src;
    return st;
}
