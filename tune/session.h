/* A whole `stoke tune` sweep as library calls: `stoke tune` and Python's
 * stoke.tune are front ends over it. A sweep is opened from an argument
 * vector of tune's flags (stk_tune_flags) and train's (every other flag of
 * stk_run_flags, fixed for all trials), as the command line, a --config
 * file or DIR/sweep.txt give them; it prints nothing but its progress lines
 * to hooks->lines.
 *
 *     char *argv[] = {"tune", "--data", "train.stoke", "--model", "mlp",
 *                     "--space", "lr=loguniform(1e-3,0.3)", "--samples", "8", NULL};
 *     stk_tune_session s;
 *     stk_status st = stk_tune_session_open(&s, 9, argv, &(stk_tune_hooks){.lines = stdout});
 *     if (st == STK_OK) st = stk_tune_session_run(&s);   // or STK_ERR_CANCELLED
 *     const stk_tune_trial *best = stk_tune_best(&s.c, s.trials, s.n);
 *     stk_tune_session_close(&s);
 */
#pragma once

#include "run/flag_table.h"
#include "tune/sweep.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* stoke tune's own flags (the rest are stoke train's). */
typedef struct stk_tune_settings {
    const char *space[32];
    int n_space;
    int64_t samples, epochs, concurrent, seed, grace, brackets, min_samples, stop_after,
        perturbation_interval;
    double reduction, quantile, resample_probability;
    int scheduler, mode;
    const char *metric, *out, *config;
    bool json, resume;
} stk_tune_settings;

/* Their table (session_flags.c): names, ranges, defaults and --help texts. */
extern const stk_flag stk_tune_flags[];

typedef struct stk_tune_hooks {
    FILE *lines; /* progress lines (under --json: stderr instead; NULL: none) */
    const volatile sig_atomic_t *cancel; /* nonzero: the sweep stops after the current step */
    /* Trial t has ended (rank 0, once trials.csv holds it). */
    void (*trial_end)(void *ctx, const stk_tune_config *c, const stk_tune_trial *t);
    void *ctx;
} stk_tune_hooks;

typedef struct stk_tune_session {
    stk_tune_settings a;
    stk_tune_config c;      /* c.out: the sweep's folder; c.rank, c.world */
    stk_tune_trial *trials; /* n of them, in id order */
    int64_t n;
    bool resume;    /* --resume: the sweep in c.out goes on */
    bool usage;     /* open failed on the flags (the CLI's usage error, exit 2) */
    double seconds; /* run's wall time */
    /* owned */
    char **eff; /* --resume's flags (sweep.txt's, and this call's) */
    int n_eff;
    char **named; /* argv with --resume DIR as --resume --out DIR */
    int n_named;
    char **mine, **theirs; /* tune's flags, train's */
    char *out_buf;         /* a default --out */
    int locks[2];
} stk_tune_session;

/* Open the sweep: argv[1..argc-1] parsed (--resume: the flags of the sweep
 * in --out, read from DIR/sweep.txt or checked against it), the trials
 * drawn and their flags checked by train's parser, the job's ranks
 * (mpirun) agreeing on the flags, DIR made (a new sweep: refused when it
 * holds something; sweep.txt written) and locked against a second sweep.
 * argv must outlive the session. Errors: INVALID_ARG with s->usage set (a
 * flag, the space, a trial's values: the message names it), or what
 * making or locking DIR met. The session is closed with
 * stk_tune_session_close whatever this returns. */
stk_status stk_tune_session_open(stk_tune_session *s, int argc, char **argv,
                                 const stk_tune_hooks *hooks);

/* The flags of a sweep checked as stk_tune_session_open checks them (the
 * space, the scheduler, every trial's train flags), with nothing opened,
 * made or locked. Errors: INVALID_ARG naming the flag. */
stk_status stk_tune_check_flags(int argc, char **argv);

/* Run the sweep's pending trials, writing DIR's files. Errors:
 * STK_ERR_CANCELLED (the hooks' cancel flag, or --stop-after's epochs
 * run: DIR/trials.csv holds where it stopped; --resume continues), what
 * stops the whole sweep. A trial that fails ends as STK_TRIAL_ERROR and the
 * sweep goes on. */
stk_status stk_tune_session_run(stk_tune_session *s);

/* Under a launcher, after a failure: stop every rank rather than leave
 * the others waiting (MPI_Abort). */
void stk_tune_session_stop_ranks(stk_tune_session *s);

/* Free everything, release DIR's locks and close the ranks. */
void stk_tune_session_close(stk_tune_session *s);

/* sweep.txt (session_args.c): argv's flags but those of one call
 * (--resume, --json, --stop-after N, --out DIR), escaped so that any
 * value round-trips. */
stk_status stk_tune_save_flags(const char *out, int argc, char **argv);

/* --resume: the flags of the sweep in --out (owned: *eff, *n_eff; free
 * with stk_tune_free_flags): read from DIR/sweep.txt when argv gives --out
 * alone, else argv's once checked to be the same; --out is always argv's (a
 * copy of a sweep resumes in the copy). Errors: INVALID_ARG naming what
 * differs. */
stk_status stk_tune_resume_flags(int argc, char **argv, char ***eff, int *n_eff);
/* --resume DIR (or --resume=DIR) as --resume --out DIR: argv rewritten
 * (owned: *out, *n_out), or *out NULL when it has no such form. Errors:
 * INVALID_ARG for another --out. */
stk_status stk_tune_resume_path(int argc, char **argv, char ***out, int *n_out);
void stk_tune_free_flags(char **v, int n);

#ifdef __cplusplus
}
#endif
