/* Trial schedulers (scheduler.h): Ray Tune's FIFO, ASHA and median
 * stopping, decision for decision. */
#include "tune/scheduler.h"

#include "common/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNGS    64
#define MAX_BRACKETS 16

/* One trial's reports, as the schedulers need them. */
typedef struct trial_state {
    bool added;
    int bracket;
    /* median: every (t, result * op) reported, in order */
    int64_t *t;
    double *v;
    int n, cap;
    /* ASHA: the rungs it has recorded a result at (bit k: rung k) */
    uint64_t recorded;
    /* PBT */
    int64_t last_perturbation; /* t of its last perturbation (0: none) */
    int64_t last_train_time;   /* t of its last recorded score (Ray's, synchronous mode) */
    bool scored, finished;
    double score; /* reward at its last recorded score */
} trial_state;

/* An ASHA rung: its milestone and the results recorded there (by trial). */
typedef struct rung {
    double milestone;
    double *results;
    int n, cap;
} rung;

typedef struct bracket {
    rung rungs[MAX_RUNGS]; /* highest milestone first, as Ray lists them */
    int n;
} bracket;

struct stk_scheduler {
    stk_sched_options o;
    double op; /* 1 maximising, -1 minimising */
    bracket brackets[MAX_BRACKETS];
    trial_state *trials;
    int64_t n_trials;
    stk_rng rng;
    int64_t next_sync; /* PBT: the t every live trial must reach before a perturbation */
};

static const char *const names[] = {"fifo", "asha", "median", "pbt"};

const char *stk_sched_name(stk_sched_kind k) { return names[k]; }

int stk_sched_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

stk_sched_options stk_sched_defaults(stk_sched_kind kind)
{
    return (stk_sched_options){.kind = kind,
                               .maximise = true,
                               .max_t = 100,
                               .grace = 1,
                               .reduction = 4,
                               .brackets = 1,
                               .min_samples = 3,
                               .perturbation_interval = 1,
                               .quantile = 0.25};
}

/* Ray: MAX_RUNGS = int(np.log(max_t / min_t) / np.log(rf) - s + 1) */
static int rung_count(const stk_sched_options *o, int s)
{
    double n = log((double)o->max_t / (double)o->grace) / log(o->reduction) - s + 1;
    return n < 0 ? 0 : (int)n;
}

stk_status stk_scheduler_create(const stk_sched_options *o, stk_scheduler **out)
{
    *out = NULL;
    if (o->max_t < 1)
        return stk_error(STK_ERR_INVALID_ARG, "--epochs %lld: must be >= 1", (long long)o->max_t);
    if (o->kind == STK_SCHED_ASHA || o->kind == STK_SCHED_MEDIAN) {
        if (o->grace < 1)
            return stk_error(STK_ERR_INVALID_ARG, "--grace %lld: must be >= 1",
                             (long long)o->grace);
    }
    if (o->kind == STK_SCHED_ASHA) {
        if (!(o->reduction > 1))
            return stk_error(STK_ERR_INVALID_ARG, "--reduction %g: must be above 1", o->reduction);
        if (o->grace > o->max_t)
            return stk_error(STK_ERR_INVALID_ARG, "--grace %lld: above --epochs %lld",
                             (long long)o->grace, (long long)o->max_t);
        if (o->brackets < 1 || o->brackets > MAX_BRACKETS || rung_count(o, o->brackets - 1) < 1)
            return stk_error(STK_ERR_INVALID_ARG,
                             "--brackets %d: must be 1..%d with --grace %lld, --reduction %g and "
                             "--epochs %lld (each bracket needs a rung)",
                             o->brackets, MAX_BRACKETS, (long long)o->grace, o->reduction,
                             (long long)o->max_t);
    }
    if (o->kind == STK_SCHED_PBT && o->perturbation_interval < 1)
        return stk_error(STK_ERR_INVALID_ARG, "--perturbation-interval %lld: must be >= 1",
                         (long long)o->perturbation_interval);
    if (o->kind == STK_SCHED_PBT && !(o->quantile > 0 && o->quantile <= 0.5))
        return stk_error(STK_ERR_INVALID_ARG, "--quantile %g: must be in (0, 0.5]", o->quantile);
    if (o->kind == STK_SCHED_MEDIAN && o->min_samples < 1)
        return stk_error(STK_ERR_INVALID_ARG, "min_samples %d: must be >= 1", o->min_samples);
    stk_scheduler *s = calloc(1, sizeof *s);
    if (!s) return stk_error(STK_ERR_NOMEM, "out of memory");
    s->o = *o;
    s->op = o->maximise ? 1 : -1;
    stk_rng_init(&s->rng, o->seed ^ 0x6173686162726b74ull, 0, 0);
    s->next_sync = o->perturbation_interval;
    if (o->kind == STK_SCHED_ASHA)
        for (int b = 0; b < o->brackets; b++) {
            bracket *br = &s->brackets[b];
            br->n = rung_count(o, b);
            if (br->n > MAX_RUNGS) br->n = MAX_RUNGS;
            for (int k = 0; k < br->n; k++) /* reversed(range(n)): highest first */
                br->rungs[k].milestone =
                    (double)o->grace * pow(o->reduction, (double)(br->n - 1 - k + b));
        }
    *out = s;
    return STK_OK;
}

void stk_scheduler_destroy(stk_scheduler *s)
{
    if (!s) return;
    for (int b = 0; b < MAX_BRACKETS; b++)
        for (int k = 0; k < s->brackets[b].n; k++) free(s->brackets[b].rungs[k].results);
    for (int64_t i = 0; i < s->n_trials; i++) {
        free(s->trials[i].t);
        free(s->trials[i].v);
    }
    free(s->trials);
    free(s);
}

int stk_scheduler_rungs(const stk_scheduler *s, int b, int64_t *milestones, int max)
{
    const bracket *br = &s->brackets[b];
    for (int k = 0; k < br->n && k < max; k++) milestones[k] = (int64_t)br->rungs[k].milestone;
    return br->n;
}

static trial_state *state(stk_scheduler *s, int64_t trial)
{
    return trial >= 0 && trial < s->n_trials ? &s->trials[trial] : NULL;
}

stk_status stk_scheduler_add(stk_scheduler *s, int64_t trial)
{
    if (trial < 0) return stk_error(STK_ERR_INVALID_ARG, "trial %lld", (long long)trial);
    if (trial >= s->n_trials) {
        int64_t n = trial + 1 > 2 * s->n_trials ? trial + 1 : 2 * s->n_trials;
        trial_state *t = realloc(s->trials, (size_t)n * sizeof *t);
        if (!t) return stk_error(STK_ERR_NOMEM, "out of memory");
        memset(t + s->n_trials, 0, (size_t)(n - s->n_trials) * sizeof *t);
        s->trials = t;
        s->n_trials = n;
    }
    trial_state *ts = &s->trials[trial];
    ts->added = true;
    if (s->o.kind == STK_SCHED_ASHA && s->o.brackets > 1) {
        /* Ray: probabilities e^(sizes - max) normalised, one draw */
        double w[MAX_BRACKETS], sum = 0;
        int most = s->brackets[0].n;
        for (int b = 0; b < s->o.brackets; b++) sum += w[b] = exp(s->brackets[b].n - most);
        double u = stk_rng_uniform(&s->rng) * sum;
        int b = 0;
        while (b < s->o.brackets - 1 && u >= w[b]) u -= w[b++];
        ts->bracket = b;
    }
    return STK_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy's nanpercentile, linear interpolation; NaN when every value is NaN. */
static double nan_percentile(const double *v, int n, double p)
{
    double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    if (!w) return NAN;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) w[m++] = v[i];
    double r = NAN;
    if (m) {
        qsort(w, (size_t)m, sizeof *w, cmp_double);
        double pos = p / 100.0 * (m - 1);
        int lo = (int)floor(pos);
        int hi = lo + 1 < m ? lo + 1 : lo;
        r = w[lo] + (w[hi] - w[lo]) * (pos - lo);
    }
    free(w);
    return r;
}

static bool push(double **v, int *n, int *cap, double x)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 8;
        double *p = realloc(*v, (size_t)c * sizeof *p);
        if (!p) return false;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

/* Ray's _Bracket.on_result. */
static stk_decision asha_on_result(stk_scheduler *s, trial_state *ts, int64_t t, double reward)
{
    bracket *br = &s->brackets[ts->bracket];
    for (int k = 0; k < br->n; k++) {
        rung *r = &br->rungs[k];
        if ((double)t < r->milestone || (ts->recorded >> k & 1)) continue;
        stk_decision d = STK_DECISION_CONTINUE;
        if (r->n) {
            double cutoff = nan_percentile(r->results, r->n, (1 - 1 / s->o.reduction) * 100);
            if (reward < cutoff) d = STK_DECISION_STOP; /* false for NaN either side */
        }
        if (!isnan(reward) && push(&r->results, &r->n, &r->cap, reward))
            ts->recorded |= 1ull << k;
        else if (isnan(reward))
            ts->recorded |= 1ull << k;
        return d;
    }
    return STK_DECISION_CONTINUE;
}

static bool push_result(trial_state *ts, int64_t t, double v)
{
    if (ts->n == ts->cap) {
        int c = ts->cap ? 2 * ts->cap : 8;
        int64_t *nt = realloc(ts->t, (size_t)c * sizeof *nt);
        if (!nt) return false;
        ts->t = nt;
        double *nv = realloc(ts->v, (size_t)c * sizeof *nv);
        if (!nv) return false;
        ts->v = nv;
        ts->cap = c;
    }
    ts->t[ts->n] = t;
    ts->v[ts->n++] = v;
    return true;
}

/* Ray's MedianStoppingRule._running_mean: np.mean of the results with
 * grace <= t' <= t (NaN when there are none, as numpy's mean of nothing). */
static double running_mean(const stk_scheduler *s, const trial_state *ts, int64_t t)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < ts->n; i++)
        if (ts->t[i] >= s->o.grace && ts->t[i] <= t) sum += ts->v[i], n++;
    return n ? sum / n : NAN;
}

/* Python's max(a, b) (min when minimising): b only when it compares better. */
static double py_best(const stk_scheduler *s, double a, double b)
{
    return (s->o.maximise ? b > a : b < a) ? b : a;
}

/* Ray's MedianStoppingRule.on_trial_result (time_attr epochs, hard stop;
 * with too few samples Ray may pause a trial to let pending ones run:
 * Stoke never pauses, it goes on, as Ray does when nothing is pending). */
static stk_decision median_on_result(stk_scheduler *s, int64_t me, int64_t t)
{
    if (t < s->o.grace) return STK_DECISION_CONTINUE;
    /* the other trials whose last report is at t or later */
    double *means = malloc((size_t)s->n_trials * sizeof *means);
    if (!means) return STK_DECISION_CONTINUE;
    int n = 0;
    bool nan = false;
    for (int64_t i = 0; i < s->n_trials; i++) {
        const trial_state *o = &s->trials[i];
        if (i != me && o->n && o->t[o->n - 1] >= t) {
            means[n] = running_mean(s, o, t);
            nan |= isnan(means[n++]);
        }
    }
    stk_decision d = STK_DECISION_CONTINUE;
    if (n >= s->o.min_samples) {
        /* np.median: NaN if any is; the middle value or the mean of the two middle ones */
        qsort(means, (size_t)n, sizeof *means, cmp_double);
        double median = nan ? NAN : n % 2 ? means[n / 2] : (means[n / 2 - 1] + means[n / 2]) / 2;
        const trial_state *ts = &s->trials[me];
        double best = ts->v[0];
        for (int i = 1; i < ts->n; i++) best = py_best(s, best, ts->v[i]);
        /* Ray: compare_op(median, best) != best (so a NaN on either side stops) */
        double kept = py_best(s, median, best);
        if (!(kept == best)) d = STK_DECISION_STOP;
    }
    free(means);
    return d;
}

stk_decision stk_scheduler_result(stk_scheduler *s, int64_t trial, int64_t t, double value)
{
    trial_state *ts = state(s, trial);
    if (!ts || !ts->added) return STK_DECISION_CONTINUE;
    double reward = s->op * value;
    switch (s->o.kind) {
    case STK_SCHED_ASHA:
        if (t >= s->o.max_t) return STK_DECISION_STOP; /* Ray: done at max_t */
        return asha_on_result(s, ts, t, reward);
    case STK_SCHED_MEDIAN: /* raw values: Ray's median rule compares with max or min */
        if (!push_result(ts, t, value)) return STK_DECISION_CONTINUE;
        return median_on_result(s, trial, t);
    default: return STK_DECISION_CONTINUE;
    }
}

void stk_scheduler_remove(stk_scheduler *s, int64_t trial)
{
    trial_state *ts = state(s, trial);
    if (ts) ts->finished = true;
}

static int cmp_score(const void *a, const void *b, void *ctx)
{
    const stk_scheduler *s = ctx;
    double x = s->trials[*(const int64_t *)a].score, y = s->trials[*(const int64_t *)b].score;
    return x < y ? -1 : x > y; /* Python's sort: stable, so ties keep the id order */
}

void stk_scheduler_pbt_result(stk_scheduler *s, int64_t trial, int64_t t, double value)
{
    trial_state *ts = state(s, trial);
    if (!ts || !ts->added || s->o.kind != STK_SCHED_PBT) return;
    if (t - ts->last_perturbation < s->o.perturbation_interval) return; /* Ray: no state saved */
    ts->scored = true;
    ts->score = s->op * value;
    ts->last_train_time = t;
}

/* Ray's _quantiles: the scored, unfinished trials by score (stable, so ties
 * keep the id order, as Python's sort keeps the order trials were added),
 * and how many each quantile holds. */
static int64_t *quantiles(stk_scheduler *s, int64_t *n, int64_t *q)
{
    int64_t *order = malloc((size_t)(s->n_trials ? s->n_trials : 1) * sizeof *order);
    *n = *q = 0;
    if (!order) return NULL;
    for (int64_t i = 0; i < s->n_trials; i++)
        if (s->trials[i].added && s->trials[i].scored && !s->trials[i].finished) order[(*n)++] = i;
    for (int64_t i = 1; i < *n; i++) /* insertion sort: stable */
        for (int64_t j = i; j > 0 && cmp_score(&order[j - 1], &order[j], s) > 0; j--) {
            int64_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    if (*n > 1) {
        *q = (int64_t)ceil((double)*n * s->o.quantile);
        if (*q > *n / 2.0) *q = (int64_t)floor(*n / 2.0);
    }
    return order;
}

stk_status stk_scheduler_pbt_round(stk_scheduler *s, stk_pbt_step *steps, int64_t *n_steps)
{
    *n_steps = 0;
    if (s->o.kind != STK_SCHED_PBT) return STK_OK;
    /* Ray's synchronous mode: wait until every live trial has reached the sync time */
    int64_t live = 0, time = 0;
    for (int64_t i = 0; i < s->n_trials; i++) {
        const trial_state *ts = &s->trials[i];
        if (!ts->added || ts->finished) continue;
        if (ts->last_train_time < s->next_sync) return STK_OK;
        live++;
        if (ts->last_train_time > time) time = ts->last_train_time;
    }
    if (!live) return STK_OK;
    int64_t n, q;
    int64_t *order = quantiles(s, &n, &q);
    if (!order) return stk_error(STK_ERR_NOMEM, "out of memory");
    const int64_t *lower = order, *upper = order + n - q;
    /* upper quantile first (they save), then the others in id order, then
     * the lower quantile (they clone a state saved in this round) */
    int64_t k = 0;
    for (int64_t i = 0; i < q; i++) steps[k++] = (stk_pbt_step){upper[i], true, -1};
    for (int64_t i = 0; i < s->n_trials; i++) {
        bool in = false;
        for (int64_t j = 0; j < q && !in; j++) in = lower[j] == i || upper[j] == i;
        if (!in && s->trials[i].added && !s->trials[i].finished)
            steps[k++] = (stk_pbt_step){i, false, -1};
    }
    for (int64_t i = 0; i < q; i++)
        steps[k++] =
            (stk_pbt_step){lower[i], false, upper[(int64_t)stk_rng_below(&s->rng, (uint32_t)q)]};
    int64_t max_train = 0;
    for (int64_t i = 0; i < k; i++) {
        trial_state *ts = &s->trials[steps[i].trial];
        ts->last_perturbation = time;
    }
    for (int64_t i = 0; i < s->n_trials; i++)
        if (s->trials[i].added && s->trials[i].last_train_time > max_train)
            max_train = s->trials[i].last_train_time;
    s->next_sync = s->next_sync + s->o.perturbation_interval > max_train
                       ? s->next_sync + s->o.perturbation_interval
                       : max_train;
    free(order);
    *n_steps = k;
    return STK_OK;
}

void stk_scheduler_complete(stk_scheduler *s, int64_t trial, int64_t t, double value)
{
    trial_state *ts = state(s, trial);
    if (!ts || !ts->added) return;
    if (s->o.kind == STK_SCHED_PBT) ts->finished = true;
    double reward = s->op * value;
    if (s->o.kind == STK_SCHED_ASHA)
        asha_on_result(s, ts, t, reward);
    else if (s->o.kind == STK_SCHED_MEDIAN)
        push_result(ts, t, value);
}
