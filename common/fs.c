#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

stk_status stk_file_read_all(const char *path, uint64_t max_bytes, uint8_t **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO named like an image must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return stk_error(STK_ERR_IO, "cannot open: %s", strerror(errno));
    stk_status st = STK_OK;
    uint8_t *buf = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = stk_error(STK_ERR_IO, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = stk_error(STK_ERR_UNSUPPORTED, "not a regular file (%s)",
                       S_ISFIFO(sb.st_mode)   ? "a FIFO"
                       : S_ISCHR(sb.st_mode)  ? "a character device"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISDIR(sb.st_mode)  ? "a directory"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "special file");
        goto out;
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        st = stk_error(STK_ERR_LIMIT, "file is %lld bytes, more than the limit of %llu",
                       (long long)sb.st_size, (unsigned long long)max_bytes);
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    buf = malloc(size ? size : 1);
    if (!buf) {
        st = stk_error(STK_ERR_NOMEM, "out of memory reading %zu bytes", size);
        goto out;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = stk_error(STK_ERR_IO, "read failed at offset %zu: %s", got, strerror(errno));
            goto out;
        }
        if (n == 0) break; /* the file shrank while we read it */
        got += (size_t)n;
    }
    *data = buf;
    *len = got;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return st;
}

bool stk_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int n;
        unsigned min;
        if ((c & 0xE0) == 0xC0)
            n = 1, min = 0x80, c &= 0x1F;
        else if ((c & 0xF0) == 0xE0)
            n = 2, min = 0x800, c &= 0x0F;
        else if ((c & 0xF8) == 0xF0)
            n = 3, min = 0x10000, c &= 0x07;
        else
            return false;
        if (i + (size_t)n >= len) return false; /* truncated sequence */
        for (int k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            c = c << 6 | (s[i + k] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
        i += (size_t)n + 1;
    }
    return true;
}

const char *stk_printable(const char *name, char *buf, size_t size)
{
    size_t o = 0;
    size_t len = strlen(name);
    for (size_t i = 0; i < len && o + 5 < size; i++) {
        unsigned char c = (unsigned char)name[i];
        /* Keep a whole valid UTF-8 sequence; escape stray bytes and controls. */
        size_t seq = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        /* U+0080..U+009F (C2 80..C2 9F) are C1 controls: a terminal may act on them (CSI). */
        bool c1 = c == 0xC2 && i + 1 < len && (unsigned char)name[i + 1] < 0xA0;
        if (c >= 0x20 && c != 0x7F && !c1 &&
            (c < 0x80 || (i + seq <= len && o + seq < size - 1 && stk_utf8_valid(name + i, seq)))) {
            memcpy(buf + o, name + i, seq);
            o += seq;
            i += seq - 1;
        } else {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02X", c);
        }
    }
    buf[o] = '\0';
    return buf;
}

stk_status stk_fsync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return stk_error(STK_ERR_NOMEM, "out of memory");
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    stk_status st = STK_OK;
    if (fd < 0 || fsync(fd) != 0)
        st = stk_error(STK_ERR_IO, "%s: cannot sync directory: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(copy);
    return st;
}

static stk_status write_all(int fd, const void *p, size_t n, const char *path)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return stk_error(STK_ERR_IO, "%s: write failed: %s", path,
                             strerror(w == 0 ? ENOSPC : errno));
        c += w;
        n -= (size_t)w;
    }
    return STK_OK;
}

/* The file a write to `path` lands in: symbolic links followed (at most 40, as
 * the kernel does), a relative target taken from the link's own folder. A
 * dangling link gives its missing target, which the write then creates. The
 * result is malloc'd; *sb is lstat of it (st_mode 0 when it does not exist). */
static stk_status resolve_links(const char *path, char **out, struct stat *sb)
{
    char *cur = strdup(path);
    if (!cur) return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
    for (int hops = 0;; hops++) {
        if (lstat(cur, sb) != 0) {
            int err = errno;
            if (err != ENOENT) {
                stk_status st = stk_error(STK_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
                free(cur);
                return st;
            }
            memset(sb, 0, sizeof *sb);
            break;
        }
        if (!S_ISLNK(sb->st_mode)) break;
        if (hops == 40) {
            free(cur);
            return stk_error(STK_ERR_IO, "%s: cannot write: %s", path, strerror(ELOOP));
        }
        char target[4096];
        ssize_t len = readlink(cur, target, sizeof target - 1);
        if (len < 0) {
            stk_status st =
                stk_error(STK_ERR_IO, "%s: cannot read the link: %s", path, strerror(errno));
            free(cur);
            return st;
        }
        target[len] = '\0';
        char *next;
        if (target[0] == '/') {
            next = strdup(target);
        } else {
            const char *slash = strrchr(cur, '/');
            size_t dlen = slash ? (size_t)(slash - cur) + 1 : 0;
            next = malloc(dlen + (size_t)len + 1);
            if (next) {
                memcpy(next, cur, dlen);
                memcpy(next + dlen, target, (size_t)len + 1);
            }
        }
        free(cur);
        if (!next) return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
        cur = next;
    }
    *out = cur;
    return STK_OK;
}

/* A character device (/dev/null, a terminal) or a FIFO has no old content to
 * keep: the parts go straight to it. A FIFO with no reader is refused rather
 * than waited on. */
static stk_status write_through(const char *path, const char *shown, bool fifo,
                                const stk_file_part *parts, int n)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | (fifo ? O_NONBLOCK : 0));
    if (fd < 0)
        return stk_error(STK_ERR_IO, "%s: cannot open for writing: %s", shown,
                         fifo && errno == ENXIO ? "a FIFO with no reader" : strerror(errno));
    if (fifo) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    stk_status st = STK_OK;
    for (int i = 0; i < n && st == STK_OK; i++)
        st = write_all(fd, parts[i].data, parts[i].len, shown);
    if (close(fd) != 0 && st == STK_OK)
        st = stk_error(STK_ERR_IO, "%s: close failed: %s", shown, strerror(errno));
    return st;
}

/* What a write may land in (mode 0: nothing yet), or the refusal naming
 * what path is: a directory, block device or socket. */
static stk_status writable_kind(const char *path, mode_t m)
{
    if (m == 0 || S_ISREG(m) || S_ISCHR(m) || S_ISFIFO(m)) return STK_OK;
    return stk_error(STK_ERR_UNSUPPORTED, "%s: will not write over it: %s", path,
                     S_ISDIR(m)    ? "a directory"
                     : S_ISBLK(m)  ? "a block device"
                     : S_ISSOCK(m) ? "a socket"
                                   : "not a regular file");
}

/* The temporary-and-rename write of a regular file (or a new one). */
static stk_status write_regular(const char *path, const stk_file_part *parts, int n)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    stk_status st = STK_OK;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = stk_error(STK_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        goto out;
    }
    for (int i = 0; i < n; i++)
        if ((st = write_all(fd, parts[i].data, parts[i].len, path)) != STK_OK) goto fail;
    if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
        st = stk_error(STK_ERR_IO, "%s: cannot sync: %s", path, strerror(errno));
        goto fail;
    }
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        st = stk_error(STK_ERR_IO, "%s: close failed: %s", path, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = stk_error(STK_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        goto fail;
    }
    st = stk_fsync_parent_dir(path);
    goto out;
fail:
    if (fd >= 0) close(fd);
    unlink(tmp);
out:
    free(tmp);
    return st;
}

/* The folder of `target` (where the temporary goes) exists and is writable. */
static stk_status folder_writable(const char *path, const char *target)
{
    char *copy = strdup(target);
    if (!copy) return stk_error(STK_ERR_NOMEM, "%s: no memory", path);
    const char *dir = dirname(copy);
    struct stat db;
    stk_status st = STK_OK;
    if (stat(dir, &db) != 0)
        st = stk_error(STK_ERR_IO, "%s: no folder %s: %s", path, dir, strerror(errno));
    else if (!S_ISDIR(db.st_mode))
        st = stk_error(STK_ERR_IO, "%s: %s is not a folder", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        st = stk_error(STK_ERR_IO, "%s: cannot write in %s: %s", path, dir, strerror(errno));
    free(copy);
    return st;
}

stk_status stk_output_path_check(const char *path)
{
    char *target;
    struct stat sb;
    STK_TRY(resolve_links(path, &target, &sb));
    stk_status st = writable_kind(path, sb.st_mode);
    if (st == STK_OK && (sb.st_mode == 0 || S_ISREG(sb.st_mode)))
        st = folder_writable(path, target);
    else if (st == STK_OK && access(target, W_OK) != 0) /* a device or FIFO */
        st = stk_error(STK_ERR_IO, "%s: cannot write to it: %s", path, strerror(errno));
    free(target);
    return st;
}

stk_status stk_file_write_atomic(const char *path, const stk_file_part *parts, int n)
{
    /* Never replace what `path` names with a new regular file: a link is
     * followed (it stays a link), a device or FIFO written through, anything
     * else refused. Only a regular file (or a new one) is written atomically. */
    char *target;
    struct stat sb;
    STK_TRY(resolve_links(path, &target, &sb));
    stk_status res = writable_kind(path, sb.st_mode);
    if (res == STK_OK && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode)))
        res = write_through(target, path, S_ISFIFO(sb.st_mode), parts, n);
    else if (res == STK_OK)
        res = write_regular(target, parts, n);
    free(target);
    return res;
}

/* The pid holding a flock on the file (dev, ino), from /proc/locks; 0 when
 * not found. Lines read "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF". */
static long lock_holder(dev_t dev, ino_t ino)
{
    FILE *f = fopen("/proc/locks", "re");
    if (!f) return 0;
    char line[256];
    long found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char kind[16];
        long pid;
        unsigned maj, min;
        unsigned long long inode;
        if (sscanf(line, "%*s %15s %*s %*s %ld %x:%x:%llu", kind, &pid, &maj, &min, &inode) == 5 &&
            !strcmp(kind, "FLOCK") && maj == major(dev) && min == minor(dev) &&
            inode == (unsigned long long)ino)
            found = pid;
    }
    fclose(f);
    return found;
}

/* pid's command line, arguments joined by spaces and made printable. */
static void command_of(long pid, char *buf, size_t size)
{
    char path[64], raw[512];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f) return;
    size_t n = fread(raw, 1, sizeof raw - 1, f);
    fclose(f);
    while (n > 0 && raw[n - 1] == '\0') n--;
    for (size_t i = 0; i < n; i++)
        if (raw[i] == '\0') raw[i] = ' ';
    raw[n] = '\0';
    stk_printable(raw, buf, size);
}

static stk_status dir_lock(const char *dir, int op, int *fd_out)
{
    *fd_out = -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return stk_error(STK_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    if (flock(fd, op | LOCK_NB) == 0) {
        *fd_out = fd;
        return STK_OK;
    }
    int err = errno;
    struct stat sb;
    long pid = err == EWOULDBLOCK && fstat(fd, &sb) == 0 ? lock_holder(sb.st_dev, sb.st_ino) : 0;
    close(fd);
    if (err != EWOULDBLOCK) return stk_error(STK_ERR_IO, "%s: cannot lock: %s", dir, strerror(err));
    char cmd[300];
    if (pid > 0) command_of(pid, cmd, sizeof cmd);
    if (pid > 0 && cmd[0])
        return stk_error(STK_ERR_BUSY, "%s is in use by pid %ld (%s)", dir, pid, cmd);
    if (pid > 0) return stk_error(STK_ERR_BUSY, "%s is in use by pid %ld", dir, pid);
    return stk_error(STK_ERR_BUSY, "%s is in use by another process", dir);
}

stk_status stk_dir_lock(const char *dir, int *fd) { return dir_lock(dir, LOCK_EX, fd); }

stk_status stk_dir_lock_shared(const char *dir, int *fd) { return dir_lock(dir, LOCK_SH, fd); }

int stk_remove_stale_temporaries(const char *dir, const char *const *names, int n)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        for (int i = 0; i < n; i++) {
            size_t len = strlen(names[i]);
            /* NAME.tmp.XXXXXX: mkstemp's six characters */
            if (strncmp(e->d_name, names[i], len) || strncmp(e->d_name + len, ".tmp.", 5) ||
                strlen(e->d_name + len + 5) != 6)
                continue;
            if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
        }
    }
    closedir(d);
    return removed;
}

int stk_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}
