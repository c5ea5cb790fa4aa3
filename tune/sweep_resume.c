/* Resuming a `stoke tune` sweep (tune_resume.h): the first run's results
 * read back and replayed to the scheduler. */
#include "tune/sweep_resume_impl.h"

#include "common/fs.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One results file's entries appended to *out. A line is "TRIAL EPOCH
 * VALUE SETTLE" (SETTLE: the sweep's count of exchanges before it; a log
 * from before it had three columns: its settle is its line's order). */
static stk_status read_file(const stk_tune_config *c, const char *path, int64_t n_trials,
                            entry **out, size_t *n, size_t *cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? STK_OK : stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    size_t line = 0;
    char buf[160];
    stk_status st = STK_OK;
    while (st == STK_OK && fgets(buf, sizeof buf, f)) {
        line++;
        char v[64];
        entry e = {.settle = -1};
        int got =
            sscanf(buf, "%" SCNd64 " %" SCNd64 " %63s %" SCNd64, &e.trial, &e.epoch, v, &e.settle);
        if (got < 3 || e.trial < 0 || e.trial >= n_trials || e.epoch < 1 || e.epoch > c->epochs ||
            (got == 4 && e.settle < 0)) {
            st = stk_error(STK_ERR_FORMAT,
                           "%s line %zu: not a result of this sweep (TRIAL EPOCH VALUE SETTLE, "
                           "trials 0..%" PRId64 ", epochs 1..%" PRId64 ")",
                           path, line, n_trials - 1, c->epochs);
            break;
        }
        e.value = strtod(v, NULL);
        e.order = *n;
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            entry *p = realloc(*out, *cap * sizeof *p);
            if (!p) {
                st = stk_error(STK_ERR_NOMEM, "out of memory");
                break;
            }
            *out = p;
        }
        (*out)[(*n)++] = e;
    }
    fclose(f);
    return st;
}

/* The order the scheduler took them in: by settle, then trial (as each
 * exchange feeds its reports); a log without settles keeps its order. */
static int by_settle(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->settle != y->settle) return x->settle < y->settle ? -1 : 1;
    if (x->settle >= 0 && x->trial != y->trial) return x->trial < y->trial ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

stk_status tune_read_log(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n_trials,
                         entry **out, size_t *n, int64_t *next_settle)
{
    *out = NULL;
    *n = 0;
    *next_settle = 0;
    size_t cap = 0;
    char path[1100];
    snprintf(path, sizeof path, "%s/results.log", c->out);
    STK_TRY(read_file(c, path, n_trials, out, n, &cap));
    /* a sweep under a launcher: each rank's file (any number of ranks) */
    for (int r = 0; r < 65536; r++) {
        snprintf(path, sizeof path, "%s/results.rank%d.log", c->out, r);
        if (access(path, F_OK) != 0) break;
        STK_TRY(read_file(c, path, n_trials, out, n, &cap));
    }
    entry *e = *out;
    qsort(e, *n, sizeof *e, by_settle);
    for (size_t i = 0; i < *n; i++)
        if (e[i].settle >= *next_settle) *next_settle = e[i].settle + 1;
    /* An entry written before a checkpoint that a kill then prevented was
     * never taken by the scheduler: a later run wrote the epoch again (the
     * later entry stands), or the trial ended before it (it goes). */
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        const stk_tune_trial *t = &trials[e[i].trial];
        bool later = false;
        for (size_t j = i + 1; j < *n && !later; j++)
            later = e[j].trial == e[i].trial && e[j].epoch == e[i].epoch;
        if (later || (t->status != STK_TRIAL_PENDING && e[i].epoch > t->epochs_run)) continue;
        if (k && e[i].trial / c->concurrent < e[k - 1].trial / c->concurrent)
            return stk_error(STK_ERR_FORMAT,
                             "%s: results of trial %" PRId64 " after cohort %" PRId64
                             "'s: not a log of this sweep",
                             c->out, e[i].trial, e[k - 1].trial / c->concurrent);
        e[k++] = e[i];
    }
    *n = k;
    return STK_OK;
}

/* The epoch of trial t's last checkpoint (0: none). */
int64_t tune_checkpoint_epoch(const stk_tune_trial *t)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/last.safetensors", t->out);
    stk_train_position pos;
    return stk_train_position_read(path, &pos) == STK_OK ? pos.epoch : 0;
}

static stk_status add_flag(stk_tune_trial *t, const char *flag)
{
    char **a = realloc(t->argv, (size_t)(t->argc + 2) * sizeof *a);
    if (!a) return stk_error(STK_ERR_NOMEM, "out of memory");
    t->argv = a;
    if (!(a[t->argc] = strdup(flag))) return stk_error(STK_ERR_NOMEM, "out of memory");
    a[++t->argc] = NULL;
    return STK_OK;
}

/* Its last entry says it ended on its own (not by the scheduler). */
static bool ended_itself(const stk_tune_config *c, const stk_tune_trial *t, const entry *e)
{
    return t->status == STK_TRIAL_COMPLETED || t->status == STK_TRIAL_EARLY_STOPPED ||
           (t->status == STK_TRIAL_PENDING && e->epoch >= c->epochs);
}

/* Feed cohort [k0, k1)'s entries (from *next on) to the scheduler as the
 * first run did; pending trials learn their figures, and a decision the
 * first run made but had not written (a stop) takes effect. */
void tune_replay_cohort(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                        const entry *log, size_t n_log, size_t *next, int64_t k0, int64_t k1,
                        const int64_t *ckpt)
{
    size_t from = *next, to = from;
    while (to < n_log && log[to].trial >= k0 && log[to].trial < k1) to++;
    *next = to;
    for (size_t i = from; i < to; i++) {
        const entry *e = &log[i];
        stk_tune_trial *t = &trials[e->trial];
        if (t->status == STK_TRIAL_PENDING && e->epoch > ckpt[e->trial]) continue; /* redone */
        bool last = true; /* its last kept entry */
        for (size_t j = i + 1; j < to && last; j++)
            last = !(log[j].trial == e->trial &&
                     (t->status != STK_TRIAL_PENDING || log[j].epoch <= ckpt[e->trial]));
        if (last && ended_itself(c, t, e)) {
            stk_scheduler_complete(s, t->id, e->epoch, e->value);
            continue;
        }
        stk_decision d = stk_scheduler_result(s, t->id, e->epoch, e->value);
        if (t->status != STK_TRIAL_PENDING) continue;
        stk_tune_trial_note(c, t, e->epoch, e->value);
        if (last && d == STK_DECISION_STOP) { /* stopped, then killed before trials.csv */
            t->status = STK_TRIAL_STOPPED;
            t->stopped_at = e->epoch;
        }
    }
}

/* The end of the replay of epoch e's entries: the trials that failed
 * during it (their last entry before e) leave the population, then PBT's
 * round, if it is complete. */
static stk_status close_epoch(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                              int64_t k0, int64_t k1, const int64_t *last, const int64_t *ckpt,
                              int64_t e, stk_pbt_step *steps)
{
    for (int64_t i = k0; i < k1; i++)
        if (trials[i].status == STK_TRIAL_ERROR && last[i - k0] < e) stk_scheduler_remove(s, i);
    int64_t k;
    STK_TRY(stk_scheduler_pbt_round(s, steps, &k));
    stk_tune_pbt_plan(c, trials, steps, k, e);
    for (int64_t i = 0; i < k; i++) {
        stk_tune_trial *t = &trials[steps[i].trial];
        if (t->status != STK_TRIAL_PENDING || ckpt[t->id] != e) continue; /* done before the stop */
        t->redo_epoch = e;
        t->redo_save = steps[i].save;
        t->redo_load = steps[i].clone >= 0;
        t->redo_src = steps[i].clone;
    }
    return STK_OK;
}

stk_status tune_replay_pbt(const stk_tune_config *c, stk_scheduler *s, stk_tune_trial *trials,
                           int64_t n_trials, const entry *log, size_t n_log, size_t *next,
                           int64_t k0, int64_t k1, const int64_t *ckpt)
{
    size_t from = *next, to = from;
    while (to < n_log && log[to].trial >= k0 && log[to].trial < k1) to++;
    *next = to;
    int64_t *last = calloc((size_t)(k1 - k0), sizeof *last); /* each trial's last kept epoch */
    stk_pbt_step *steps = malloc((size_t)n_trials * sizeof *steps);
    stk_status st = last && steps ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    for (size_t i = from; st == STK_OK && i < to; i++) {
        const entry *e = &log[i];
        if (trials[e->trial].status != STK_TRIAL_PENDING || e->epoch <= ckpt[e->trial])
            last[e->trial - k0] = e->epoch;
    }
    int64_t epoch = 0; /* the population reports epoch by epoch: the log is in epoch order */
    for (size_t i = from; st == STK_OK && i < to; i++) {
        const entry *e = &log[i];
        stk_tune_trial *t = &trials[e->trial];
        if (t->status == STK_TRIAL_PENDING && e->epoch > ckpt[e->trial]) continue; /* redone */
        if (e->epoch != epoch && epoch)
            st = close_epoch(c, s, trials, k0, k1, last, ckpt, epoch, steps);
        epoch = e->epoch;
        if (e->epoch == last[e->trial - k0] && ended_itself(c, t, e))
            stk_scheduler_complete(s, t->id, e->epoch, e->value);
        else
            stk_scheduler_pbt_result(s, t->id, e->epoch, e->value);
        if (t->status == STK_TRIAL_PENDING) stk_tune_trial_note(c, t, e->epoch, e->value);
    }
    if (st == STK_OK && epoch) st = close_epoch(c, s, trials, k0, k1, last, ckpt, epoch, steps);
    for (int64_t i = k0; st == STK_OK && i < k1; i++) /* they report no more */
        if (trials[i].status == STK_TRIAL_ERROR) stk_scheduler_remove(s, i);
    free(last);
    free(steps);
    return st;
}

/* Before resuming: each pending trial continues from its checkpoint, or
 * starts over in its folder. */
stk_status tune_resume_flags(stk_tune_trial *trials, int64_t n, const int64_t *ckpt)
{
    for (int64_t i = 0; i < n; i++) {
        stk_tune_trial *t = &trials[i];
        if (t->status != STK_TRIAL_PENDING) continue;
        if (ckpt[i] > 0)
            STK_TRY(add_flag(t, "--resume"));
        else if (access(t->out, F_OK) == 0)
            STK_TRY(add_flag(t, "--overwrite"));
    }
    return STK_OK;
}

stk_status stk_tune_open_log(stk_tune_config *c)
{
    char path[1100];
    if (c->world > 1) /* each rank its own file: its entries precede its checkpoints */
        snprintf(path, sizeof path, "%s/results.rank%d.log", c->out, c->rank);
    else
        snprintf(path, sizeof path, "%s/results.log", c->out);
    if (!(c->results = fopen(path, "a")))
        return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    return STK_OK;
}
