/* The run folder (run_folder_impl.h). */
#include "run/run_folder_impl.h"

#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* RUNDIR is written by one run at a time (rank 0 writes it): a second
 * writer is refused, naming the holder, before it reads or writes anything
 * there; the lock goes with the process, however it ends. Temporaries left
 * by a writer that was killed are removed once the lock is held. */
static stk_status lock_run_folder(stk_run *r)
{
    int fd;
    stk_status st = stk_dir_lock(r->a.out, &fd);
    if (st == STK_ERR_BUSY)
        return stk_error(st, "--out %s; wait for that run to end, or choose another --out",
                         stk_last_error());
    if (st != STK_OK) return stk_error_prefix(st, "--out");
    r->out_lock = fd + 1;
    static const char *const written[] = {"last.safetensors", "best.safetensors", "metrics.csv",
                                          "steps.csv"};
    int n = stk_remove_stale_temporaries(r->a.out, written, 4);
    if (n)
        stk_log_info("removed %d temporary file%s left in %s by an earlier run that was killed", n,
                     n == 1 ? "" : "s", r->a.out);
    return STK_OK;
}

/* x as the shortest text that reads back as x (0.1, not 0.10000000000000001) */
/* The files a run writes into RUNDIR: what --overwrite removes. */
static bool run_file(const char *name)
{
    static const char *const names[] = {"last.safetensors", "best.safetensors", "metrics.csv",
                                        "steps.csv",        "curves.svg",       NULL};
    for (int i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        /* the file, or its temporary (NAME.tmp.XXXXXX) */
        if (!strncmp(name, names[i], n) && (!name[n] || !strncmp(name + n, ".tmp.", 5)))
            return true;
    }
    return !strncmp(name, "events.out.tfevents.", 20);
}

/* RUNDIR holds something: refused unless --resume or --overwrite (which
 * clears the old run's files first). Under the lock. */
static stk_status claim_run_folder(stk_run *r)
{
    const stk_run_settings *a = &r->a;
    DIR *d = opendir(a->out);
    if (!d) return stk_error(STK_ERR_IO, "--out %s: %s", a->out, strerror(errno));
    int entries = 0, removed = 0;
    char first[256] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (a->overwrite && run_file(e->d_name) && unlinkat(dirfd(d), e->d_name, 0) == 0) {
            removed++;
            continue;
        }
        if (!entries++) snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (removed)
        stk_log_info("--overwrite: removed %d file%s of the run in %s", removed,
                     removed == 1 ? "" : "s", a->out);
    if (entries && !a->resume && !a->overwrite) {
        char shown[96];
        return stk_error(STK_ERR_INVALID_ARG,
                         "--out %s already holds a run (%s%s): continue it with --resume, or "
                         "replace it with --overwrite",
                         a->out, stk_printable(first, shown, sizeof shown),
                         entries > 1 ? ", ..." : "");
    }
    return STK_OK;
}

/* Make RUNDIR (and its parents), lock it and claim it (rank 0, which alone
 * writes it). */
stk_status run_prepare_folder(stk_run *r)
{
    if (stk_make_dirs(r->a.out) != 0)
        return stk_error(STK_ERR_IO, "--out %s: %s", r->a.out, strerror(errno));
    STK_TRY(lock_run_folder(r));
    return claim_run_folder(r);
}
