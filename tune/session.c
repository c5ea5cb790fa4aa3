/* A whole sweep as library calls (session.h): open from flags, run, close. */
#include "tune/session_impl.h"

#include "common/clock.h"
#include "common/log.h"
#include "kernels/backend.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The flags parsed into s->a and s->c: tune's own and train's fixed ones. */
static stk_status parse(stk_tune_session *s, int argc, char **argv)
{
    if (!(s->mine = calloc((size_t)argc + 1, sizeof *s->mine)) ||
        !(s->theirs = calloc((size_t)argc + 1, sizeof *s->theirs)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    int n_mine, n_theirs;
    tune_split_flags(argc, argv, s->mine, &n_mine, s->theirs, &n_theirs);
    STK_TRY(stk_flag_defaults(stk_tune_flags, &s->a));
    STK_TRY(stk_flag_parse_args(stk_tune_flags, &s->a, n_mine, s->mine));
    STK_TRY(tune_configure(&s->a, &s->c, s->theirs, n_theirs));
    if (!s->a.out && !(s->a.out = s->out_buf = tune_default_out()))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    s->c.out = s->a.out;
    s->n = stk_space_trials(&s->c.space, s->c.samples);
    if (!(s->trials = calloc((size_t)s->n, sizeof *s->trials)))
        return stk_error(STK_ERR_NOMEM, "out of memory for %" PRId64 " trials", s->n);
    return stk_tune_prepare(&s->c, s->trials, s->n);
}

stk_status stk_tune_session_open(stk_tune_session *s, int argc, char **argv,
                                 const stk_tune_hooks *hooks)
{
    memset(s, 0, sizeof *s);
    s->locks[0] = s->locks[1] = -1;
    stk_status st = stk_tune_resume_path(argc, argv, &s->named, &s->n_named);
    if (st != STK_OK) {
        s->usage = true;
        return st;
    }
    if (s->named) argc = s->n_named, argv = s->named;
    for (int i = 1; i < argc; i++) s->resume |= !strcmp(argv[i], "--resume");
    if (s->resume && (st = stk_tune_resume_flags(argc, argv, &s->eff, &s->n_eff)) == STK_OK)
        argc = s->n_eff, argv = s->eff;
    if (st == STK_OK) st = parse(s, argc, argv);
    if (st != STK_OK) {
        s->usage = st == STK_ERR_INVALID_ARG;
        return st;
    }
    stk_tune_config *c = &s->c;
    c->lines = hooks->lines && s->a.json ? stderr : hooks->lines;
    c->cancel = hooks->cancel;
    c->trial_end = hooks->trial_end;
    c->trial_end_ctx = hooks->ctx;
    STK_TRY(stk_comm_open(300, &c->comm));
    c->rank = stk_comm_rank(c->comm);
    c->world = stk_comm_world(c->comm);
    if (c->rank) c->lines = NULL; /* rank 0 speaks for the job */
    if (c->world > 1) STK_TRY(tune_ranks_agree(c, argc, argv));
    if (!s->resume) STK_TRY(tune_make_folder(c, argc, argv));
    return tune_lock_folder(c, s->locks);
}

stk_status stk_tune_check_flags(int argc, char **argv)
{
    stk_tune_session s;
    memset(&s, 0, sizeof s);
    s.locks[0] = s.locks[1] = -1;
    stk_status st = stk_tune_resume_path(argc, argv, &s.named, &s.n_named);
    if (st == STK_OK && s.named) argc = s.n_named, argv = s.named;
    for (int i = 1; st == STK_OK && i < argc; i++) s.resume |= !strcmp(argv[i], "--resume");
    if (st == STK_OK && s.resume &&
        (st = stk_tune_resume_flags(argc, argv, &s.eff, &s.n_eff)) == STK_OK)
        argc = s.n_eff, argv = s.eff;
    if (st == STK_OK) st = parse(&s, argc, argv);
    stk_tune_session_close(&s);
    return st;
}

stk_status stk_tune_session_run(stk_tune_session *s)
{
    stk_tune_config *c = &s->c;
    stk_tune_trial *trials = s->trials;
    int64_t n = s->n;
    stk_run_settings first; /* the machine's flags are every trial's */
    STK_TRY(stk_run_settings_from_args(&first, trials[0].argc, trials[0].argv));
    stk_cpu_set_threads((int)first.threads);
    bool tensorboard = !first.no_tensorboard, val = first.val != NULL;
    stk_run_settings_free(&first);
    if (s->resume) STK_TRY(stk_tune_read_trials(c, trials, n));
    /* results.log (results.rankR.log under a launcher), for --resume */
    if (!s->resume) STK_TRY(stk_tune_open_log(c));
    if (!s->resume && c->rank == 0 && tensorboard) STK_TRY(stk_tune_hparams_experiment(c, val));
    int64_t ended = 0;
    for (int64_t i = 0; i < n; i++) ended += trials[i].status != STK_TRIAL_PENDING;
    if (c->lines) {
        fprintf(c->lines,
                "tune: %" PRId64 " trials, %" PRId64 " side by side on one stream, %s, %s (%s), "
                "up to %" PRId64 " epochs, into %s%s\n",
                n, c->concurrent < n ? c->concurrent : n, stk_sched_name(c->sched.kind),
                stk_monitor_name(c->metric), c->maximise ? "max" : "min", c->epochs, c->out,
                s->resume ? " (resumed)" : "");
        if (s->resume) fprintf(c->lines, "resume: %" PRId64 " trials had ended\n", ended);
        fflush(c->lines);
    }
    double t0 = stk_clock_sec();
    stk_status st = stk_tune_run(c, trials, n, s->resume);
    s->seconds = stk_clock_sec() - t0;
    if (c->results) fclose(c->results);
    c->results = NULL;
    if (st == STK_ERR_CANCELLED && c->rank == 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", stk_last_error());
        if (stk_tune_write_trials(c, trials, n) != STK_OK) stk_log_warn("%s", stk_last_error());
        st = stk_error(STK_ERR_CANCELLED, "%s", why);
    }
    return st;
}

void stk_tune_session_stop_ranks(stk_tune_session *s)
{
    if (s->c.world > 1) stk_comm_abort(s->c.comm, 1);
}

void stk_tune_session_close(stk_tune_session *s)
{
    stk_tune_trials_free(s->trials, s->n);
    stk_space_free(&s->c.space);
    free(s->out_buf);
    free(s->mine);
    free(s->theirs);
    stk_tune_free_flags(s->eff, s->n_eff);
    stk_tune_free_flags(s->named, s->n_named);
    stk_comm_close(s->c.comm);
    for (int i = 0; i < 2; i++)
        if (s->locks[i] >= 0) close(s->locks[i]);
    memset(s, 0, sizeof *s);
    s->locks[0] = s->locks[1] = -1;
}
