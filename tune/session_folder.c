/* A sweep's folder (session_impl.h): its name, making it, the ranks'
 * agreement before anything is written, and the locks that keep a second
 * sweep out of it. */
#include "common/crc32c.h"
#include "common/fs.h"
#include "tune/session_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* runs/tune-N, a fresh N */
char *tune_default_out(void)
{
    int highest = 0;
    DIR *d = opendir("runs");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "tune-", 5) && atoi(e->d_name + 5) > highest)
            highest = atoi(e->d_name + 5);
    if (d) closedir(d);
    char buf[32];
    snprintf(buf, sizeof buf, "runs/tune-%d", highest + 1);
    return strdup(buf);
}

/* DIR and DIR/trials, refused when DIR already holds something */
static stk_status make_out(const char *out)
{
    char path[1100];
    if (stk_make_dirs(out) != 0) return stk_error(STK_ERR_IO, "--out %s: %s", out, strerror(errno));
    DIR *d = opendir(out);
    if (!d) return stk_error(STK_ERR_IO, "--out %s: %s", out, strerror(errno));
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(d))) entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    if (entries)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--out %s already holds something: choose another --out", out);
    snprintf(path, sizeof path, "%s/trials", out);
    if (mkdir(path, 0755) != 0) return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    return STK_OK;
}

/* Under a launcher, before anything is written: every rank runs the same
 * sweep (a fingerprint of their flags). */
stk_status tune_ranks_agree(stk_tune_config *c, int argc, char **argv)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 1; i < argc; i++) h = stk_fnv1a64(h, argv[i], strlen(argv[i]) + 1);
    uint64_t *all = calloc((size_t)c->world, sizeof *all);
    if (!all) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_comm_allgather(c->comm, &h, sizeof h, all);
    for (int r = 1; st == STK_OK && r < c->world; r++)
        if (all[r] != all[0])
            st = stk_error(STK_ERR_INVALID_ARG,
                           "rank %d was given other stoke tune flags than rank 0: every rank "
                           "must run the same sweep",
                           r);
    free(all);
    return st;
}

/* Rank 0's folder exists (made = its outcome there) before any rank writes
 * a trial's. */
static stk_status folder_made(stk_tune_config *c, stk_status made)
{
    int32_t ok = made == STK_OK;
    stk_status st = stk_comm_broadcast(c->comm, &ok, sizeof ok, 0);
    if (st == STK_OK && !ok)
        st = c->rank ? stk_error(STK_ERR_IO, "rank 0 could not make --out %s", c->out) : made;
    return st;
}

stk_status tune_make_folder(stk_tune_config *c, int argc, char **argv)
{
    stk_status made = STK_OK;
    if (c->rank == 0 && (made = make_out(c->out)) == STK_OK)
        made = stk_tune_save_flags(c->out, argc, argv);
    return c->world > 1 ? folder_made(c, made) : made;
}

/* The sweep's folder is this process's while it runs: rank 0 holds DIR
 * exclusively and every rank holds DIR/trials shared, so a second `stoke
 * tune` on DIR (a --resume while the sweep runs, or a new job while ranks of
 * a killed one live on) is refused before it reads or writes anything.
 * fds[0..1] are closed by the caller (the locks go with them). */
stk_status tune_lock_folder(stk_tune_config *c, int fds[2])
{
    char trials[1100];
    snprintf(trials, sizeof trials, "%s/trials", c->out);
    stk_status st = STK_OK;
    if (c->rank == 0 && (st = stk_dir_lock(c->out, &fds[0])) == STK_OK &&
        (st = stk_dir_lock(trials, &fds[1])) == STK_OK && flock(fds[1], LOCK_SH) != 0)
        st = stk_error(STK_ERR_IO, "%s: cannot lock: %s", trials, strerror(errno));
    if (st != STK_OK) st = stk_error(st, "--out: %s", stk_last_error());
    if (c->world == 1) return st;
    /* the others take their shares once rank 0 has made its check */
    int32_t ok0 = st == STK_OK;
    STK_TRY(stk_comm_broadcast(c->comm, &ok0, sizeof ok0, 0));
    if (!ok0)
        return c->rank ? stk_error(STK_ERR_BUSY, "--out %s: rank 0 could not lock it", c->out) : st;
    if (c->rank != 0 && (st = stk_dir_lock_shared(trials, &fds[1])) != STK_OK)
        st = stk_error(st, "--out: %s", stk_last_error());
    /* every rank's outcome (a sum of failures), so none goes on alone */
    float failed = st != STK_OK;
    stk_status ag = stk_comm_allreduce_sum(c->comm, &failed, 1);
    if (ag != STK_OK) return ag;
    if (st == STK_OK && failed > 0)
        st = stk_error(STK_ERR_BUSY, "--out %s: %.0f rank(s) could not lock it", c->out, failed);
    return st;
}
