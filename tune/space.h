/* A hyperparameter search space in Ray Tune's words, and the trials drawn
 * from it.
 *
 *     stk_space s;
 *     STK_TRY(stk_space_parse(&s, "lr=loguniform(1e-3,0.3); wd=choice(0,1e-4,5e-4)"));
 *     STK_TRY(stk_space_parse(&s, "batch=grid(64,128)"));  // more keys, more calls
 *     int64_t n = stk_space_trials(&s, 8);   // 8 samples of each grid point: 16
 *     stk_trial_params p;
 *     stk_space_draw(&s, seed, 5, &p);      // trial 5: p.n keys, p.value[i] as text
 *     stk_space_free(&s);
 *
 * Distributions (Ray Tune's tune.*): uniform(lo,hi), quniform(lo,hi,q),
 * loguniform(lo,hi), qloguniform(lo,hi,q), randint(lo,hi) (an integer in
 * [lo, hi)), choice(v1,v2,...) (numbers or words; 'a,b' in single quotes
 * holds commas), grid(v1,v2,...): the
 * grid keys' cartesian product, every point repeated for each sample, as
 * Ray's grid_search with num_samples. Quantised values are round(x/q)*q.
 *
 * Trial t's values depend only on the seed, t and the space: t selects the
 * grid point (t mod the grid's size, the last grid key fastest) and a
 * random stream of its own for the random keys, so the first trials of a
 * longer sweep are the trials of a shorter one. Values are written as the
 * shortest text that reads back to the same double.
 *
 * Errors (stk_space_parse): STK_ERR_INVALID_ARG naming the key and the
 * reason: no '=', an unknown distribution, a wrong number of arguments, a
 * number that is not one, an empty range (lo >= hi), a log range with a
 * bound <= 0, q <= 0, an empty choice, a key given twice.
 */
#pragma once

#include "common/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_SPACE_MAX_KEYS   32
#define STK_SPACE_MAX_VALUES 64
#define STK_SPACE_VALUE_MAX  128 /* bytes of a choice or grid value, with its NUL */

typedef enum stk_dist {
    STK_DIST_UNIFORM,
    STK_DIST_QUNIFORM,
    STK_DIST_LOGUNIFORM,
    STK_DIST_QLOGUNIFORM,
    STK_DIST_RANDINT,
    STK_DIST_CHOICE,
    STK_DIST_GRID,
} stk_dist;

typedef struct stk_space_key {
    char *name;
    stk_dist dist;
    double lo, hi, q;                   /* the numeric distributions */
    char *values[STK_SPACE_MAX_VALUES]; /* choice and grid */
    int n_values;
} stk_space_key;

typedef struct stk_space {
    stk_space_key keys[STK_SPACE_MAX_KEYS];
    int n;
} stk_space;

/* Add the keys of `text`: entries KEY=DIST(ARGS) separated by ';' or
 * white space. On error nothing of `text` is added. */
stk_status stk_space_parse(stk_space *s, const char *text);

/* The most trials a sweep may hold: each keeps its values and flags in
 * memory and a line of trials.csv, which is rewritten as trials end. */
#define STK_SPACE_MAX_TRIALS 10000

/* The number of trials for `samples` samples: samples times the grid's size;
 * -1 when that is more than STK_SPACE_MAX_TRIALS (or samples < 1). */
int64_t stk_space_trials(const stk_space *s, int64_t samples);

typedef struct stk_trial_params {
    int n;
    const char *key[STK_SPACE_MAX_KEYS]; /* the space's names */
    char value[STK_SPACE_MAX_KEYS][STK_SPACE_VALUE_MAX];
} stk_trial_params;

/* The values of trial `trial` (0-based) for `seed`. */
void stk_space_draw(const stk_space *s, uint64_t seed, int64_t trial, stk_trial_params *out);

/* Population based training's explore step (Ray's _explore, factors 1.2 and
 * 0.8): from `from`'s values, each key is drawn anew from its distribution
 * with probability resample_p; otherwise a choice or grid value moves to a
 * neighbour in its list (clipped at the ends; a value not in the list is
 * drawn anew), a number is multiplied by 1.2 or 0.8 (randint: truncated to
 * an integer). */
struct stk_rng;
void stk_space_explore(const stk_space *s, struct stk_rng *r, double resample_p,
                       const stk_trial_params *from, stk_trial_params *out);

/* "uniform", ... */
const char *stk_dist_name(stk_dist d);

/* The shortest text that strtod reads back to x: plain decimals when they
 * take at most 24 bytes (20, 0.001), else %g's (1e-07). */
void stk_number_text(double x, char buf[32]);

void stk_space_free(stk_space *s);

#ifdef __cplusplus
}
#endif
