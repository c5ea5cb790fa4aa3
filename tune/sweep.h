/* `stoke tune`'s sweep (tune_run.c and its parts): trials drawn from a search space,
 * run as `stoke train` runs would be (run/run.h), several at a
 * time on one shared stream of decoded, augmented batches, a scheduler
 * (tune/scheduler.h) deciding after each epoch which go on; and what the
 * sweep writes (tune_report.c).
 *
 * Cohorts: up to `concurrent` trials start together and share the loader
 * of their data flags (a group: same --batch, --order, --transform,
 * --val-transform; a space over them makes several groups, run one after
 * another). Each epoch every running trial of a group steps on the same
 * batch in turn, then every one is evaluated on the same validation
 * batches: one read, decode and augmentation of each image per epoch for
 * the whole group. The next cohort starts when this one has ended. A
 * trial's numbers do not depend on its neighbours: its model, optimizer and
 * position are its own, and every trial runs with the sweep's --seed, so
 * its data order, augmentation and initialisation are those of `stoke
 * train --seed S` with its flags (its `command`).
 */
#pragma once

#include "distributed/comm.h"
#include "run/run.h"
#include "tune/scheduler.h"
#include "tune/space.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_trial_status {
    STK_TRIAL_PENDING,
    STK_TRIAL_COMPLETED,     /* ran to --epochs */
    STK_TRIAL_STOPPED,       /* the scheduler stopped it (stopped_at) */
    STK_TRIAL_EARLY_STOPPED, /* its own early stopping (--early-stop) */
    STK_TRIAL_ERROR,         /* failed (diverged, ...): error */
} stk_trial_status;

/* The longest --out a sweep takes (its trials' folders and files below it
 * must fit stk_tune_trial.out and the 1100-byte paths of tune_*.c). */
#define TUNE_OUT_MAX 1000

typedef struct stk_tune_trial {
    int64_t id;
    int64_t saved_epoch; /* PBT: the epoch of its kept state (0: none) */
    uint64_t saved_hash;
    bool cloned; /* PBT: its values changed mid-run (no single command) */
    /* PBT, resumed: its part of the round at redo_epoch (0: none) is done
     * again once it runs: it stopped before that round's save or load. */
    int64_t redo_epoch, redo_src;
    bool redo_save, redo_load;
    bool announced; /* its end was announced (or it had ended when resumed) */
    stk_trial_params params;
    stk_trial_status status;
    int64_t epochs_run, stopped_at, best_epoch;
    double best_value, seconds;
    char error[512];
    char out[1024]; /* DIR/trials/ID */
    char **argv;    /* its `stoke train` flags (argv[0] "train"), owned */
    int argc;
    char *command; /* the shell command that reproduces it, owned */
} stk_tune_trial;

typedef struct stk_tune_config {
    const char *out; /* DIR */
    int64_t samples, epochs, concurrent, seed;
    stk_sched_options sched;
    stk_monitor metric;
    bool maximise;
    char **train_argv; /* the fixed `stoke train` flags */
    int train_argc;
    stk_space space;
    FILE *lines; /* progress lines (the CLI's stdout, or stderr under --json; NULL: none) */
    const volatile sig_atomic_t
        *cancel; /* the caller's flag: nonzero stops the sweep (NULL: none) */
    /* Trial t has ended (rank 0, once trials.csv holds it; NULL: none). */
    void (*trial_end)(void *ctx, const struct stk_tune_config *c, const stk_tune_trial *t);
    void *trial_end_ctx;
    FILE *results;        /* DIR/results.log: "TRIAL EPOCH VALUE SETTLE" per reported epoch */
    int64_t stop_after;   /* > 0: end this call after that many trial epochs (resume later) */
    int64_t *epochs_done; /* this call's trial epochs (tune_run's counter) */
    int64_t *settle;      /* the sweep's exchanges so far (tune_run's; results.log's 4th column) */
    double resample_probability; /* PBT's explore */
    struct stk_rng *explore;     /* PBT's explore draws (tune_run's) */
    /* The job's ranks (mpirun): cohort trial i runs on rank i mod world;
     * rank 0 writes DIR's files and prints. */
    struct stk_comm *comm;
    int rank, world;
} stk_tune_config;

/* The trials' flags and commands (before anything runs). Errors: a usage
 * error of a trial's flags (printed by train's parser; the message names
 * the trial and its values). */
stk_status stk_tune_prepare(const stk_tune_config *c, stk_tune_trial *trials, int64_t n);

/* Run every pending trial. A trial that fails ends as STK_TRIAL_ERROR and the
 * sweep goes on. Cohort k is always trials [k*concurrent, (k+1)*concurrent):
 * a resumed sweep runs each cohort's pending trials where the first run
 * would have. Errors: STK_ERR_CANCELLED (Ctrl-C: the trials that ended keep
 * their status), what stops the whole sweep (the scheduler, memory).
 *
 * Resuming (`replay` true): the statuses of DIR/trials.csv's ended trials
 * are kept; DIR/results.log is fed to the scheduler in its order (a
 * trial's entries past its last checkpoint are dropped: it redoes those
 * epochs, reporting them again in the same place), so its decisions are
 * those of the first run; unfinished trials continue from their last
 * checkpoint (stoke train --resume). */
stk_status stk_tune_run(stk_tune_config *c, stk_tune_trial *trials, int64_t n, bool replay);

/* DIR/results.log opened for appending into c->results (a new sweep; a
 * resumed one opens it once its replay has rewritten it). */
stk_status stk_tune_open_log(stk_tune_config *c);

/* The statuses and figures of DIR/trials.csv's ended trials into trials
 * (tune_report.c). Errors: STK_ERR_FORMAT naming the line. */
stk_status stk_tune_read_trials(const stk_tune_config *c, stk_tune_trial *trials, int64_t n);

void stk_tune_trials_free(stk_tune_trial *trials, int64_t n);

/* Population based training (tune_pbt.c), in rounds (tune/scheduler.h:
 * every trial of the population at the same epoch). tune_pbt_plan, on every
 * rank in the steps' order (so that the explore draws stay in step): the
 * top's kept epoch, the bottom's values explored from their clone's
 * (stk_space_explore). Then the owners act: tune_pbt_save keeps trial t's
 * state (DIR/trials/ID/pbt.safetensors) for others to clone; once every
 * save of the round is written, tune_pbt_load loads trial src's kept state
 * into t's trainer (model, optimizer, position: bit for bit) and applies
 * t's explored values (lr, momentum, wd, label-smoothing). Each writes a
 * line of DIR/trials/ID/pbt.csv with a hash of the state saved or loaded
 * (once: a resumed sweep that does a round's part again writes none). */
void stk_tune_pbt_plan(const stk_tune_config *c, stk_tune_trial *trials, const stk_pbt_step *steps,
                       int64_t n, int64_t epoch);
stk_status stk_tune_pbt_save(const stk_tune_config *c, stk_tune_trial *t, stk_trainer *tr,
                             int64_t epoch);
stk_status stk_tune_pbt_load(const stk_tune_config *c, stk_tune_trial *t, stk_trainer *tr,
                             const stk_tune_trial *src, int64_t epoch);
/* A cloned trial's values into its trainer (a resumed trial's, set up with
 * the values it started with). */
stk_status stk_tune_pbt_set_values(stk_trainer *tr, const stk_trial_params *p);
/* The keys PBT can change while a trial runs. */
bool stk_tune_pbt_key(const char *key);

/* Trial t's epoch `epoch` (counted from 1) had the sweep's metric v: its
 * epochs run and best so far (stk_tune_trial.c; the replay of a resume too). */
void stk_tune_trial_note(const stk_tune_config *c, stk_tune_trial *t, int64_t epoch, double v);

/* "COMPLETED", "STOPPED@3", "EARLY_STOPPED", "ERROR", "PENDING" */
void stk_tune_status_text(const stk_tune_trial *t, char buf[32]);

/* TensorBoard's HParams experiment summary in DIR (the space's keys as
 * columns; the epoch metrics, val_* with a validation set); each trial
 * writes its session start and end in its own folder (unless
 * --no-tensorboard). */
stk_status stk_tune_hparams_experiment(const stk_tune_config *c, bool val);

/* The text `fill` writes to its stream, written atomically to path (the
 * sweep's files: trials.csv, best.json, results.log, sweep.txt). */
stk_status stk_tune_write_text(const char *path, void (*fill)(FILE *, const void *),
                               const void *ctx);

/* The best trial (by the sweep's metric; ties: the lower id), or NULL when
 * none has a figure. */
const stk_tune_trial *stk_tune_best(const stk_tune_config *c, const stk_tune_trial *trials,
                                    int64_t n);

/* DIR/trials.csv alone (after each trial ends). */
stk_status stk_tune_write_trials(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n);
/* DIR/trials.csv, DIR/best.json, DIR/best.safetensors; the ranked summary
 * on `f` (or one JSON object with --json). (tune_report.c) */
stk_status stk_tune_write_results(const stk_tune_config *c, const stk_tune_trial *trials,
                                  int64_t n);
void stk_tune_print_summary(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n,
                            FILE *f, bool json, double seconds);
/* DIR/trials/ID/params.json */
stk_status stk_tune_write_params(const stk_tune_trial *t);

#ifdef __cplusplus
}
#endif
