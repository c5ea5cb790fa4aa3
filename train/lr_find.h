/* The learning-rate range test (Leslie Smith, "Cyclical Learning Rates",
 * 2017; fastai's lr_find): train for up to N steps while the learning rate
 * grows exponentially from `start` to `end`, record the loss, smooth it
 * (an exponential moving average with bias correction, beta 0.98 as
 * fastai), stop once the smoothed loss exceeds `stop_factor` (4) times its
 * minimum or is not finite, and suggest a learning rate:
 *   steepest   where the smoothed loss falls fastest against log(lr)
 *              (the minimum of its numerical gradient, np.gradient's
 *              central differences; fastai's "steep")
 *   minimum/10 a tenth of the learning rate at the smoothed minimum
 *              (fastai's "minimum")
 * `stoke lr-find` runs it on the training data with the run's augmentation;
 * the model and optimizer a caller passes are left as they were.
 *
 *     stk_lr_sweep s;
 *     STK_TRY(stk_lr_sweep_init(&s, 1e-7, 10, 100, 0.98, 4));
 *     for (int i = 0; i < s.steps; i++) {
 *         set the lr to stk_lr_sweep_lr(&s, i); step;
 *         if (stk_lr_sweep_record(&s, loss)) break;      // the stop rule
 *     }
 *     stk_lr_suggestion g;
 *     stk_lr_sweep_suggest(&s, &g);                        // g.steepest, g.min_over_10
 *     stk_lr_sweep_free(&s);
 */
#pragma once

#include "engine/optim.h"
#include "loader/h2d.h"
#include "loader/loader.h"
#include "train/trainer.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_lr_sweep {
    double start, end, beta, stop_factor;
    int steps;                  /* at most */
    int n;                      /* recorded so far */
    double *lr, *loss, *smooth; /* per recorded step */
    double avg;                 /* the moving average, before bias correction */
    double best;                /* the lowest smoothed loss */
    int best_at;
    bool diverged; /* stopped by the rule (else: ran its steps) */
} stk_lr_sweep;

/* Errors: INVALID_ARG (0 < start < end finite, steps 3..100000, beta in
 * [0, 1), stop_factor > 1), NOMEM. */
stk_status stk_lr_sweep_init(stk_lr_sweep *s, double start, double end, int steps, double beta,
                             double stop_factor);
void stk_lr_sweep_free(stk_lr_sweep *s);
/* The learning rate of step i: start * (end / start)^(i / (steps - 1)). */
double stk_lr_sweep_lr(const stk_lr_sweep *s, int i);
/* Record step n's loss; true when the sweep should stop (the smoothed loss
 * is above stop_factor x its minimum or not finite, or the steps are done). */
bool stk_lr_sweep_record(stk_lr_sweep *s, double loss);

typedef struct stk_lr_suggestion {
    double steepest, min_over_10; /* NaN with fewer than 3 recorded steps */
    int steepest_at, min_at;      /* their steps (min_at: the smoothed minimum) */
} stk_lr_suggestion;
void stk_lr_sweep_suggest(const stk_lr_sweep *s, stk_lr_suggestion *out);

typedef struct stk_lr_find_options {
    stk_trainer_config trainer; /* the run's: device, normalisation, smoothing, mix, ... */
    stk_optim_config optim;     /* the optimizer the sweep trains with (its lr is swept) */
    /* after each step (NULL: none); an error (Ctrl-C) ends the sweep with it */
    stk_status (*progress)(void *ctx, const stk_lr_sweep *s);
    void *ctx;
} stk_lr_find_options;

/* Run sweep s (initialised) on `model` with batches from loader l through
 * h2d, epoch after epoch, training mode, a fresh optimizer of o->optim.
 * The model's weights and buffers are restored afterwards (kept in host
 * memory meanwhile), also on an error. A step whose loss is not finite
 * ends the sweep (diverged), not the call. Errors: the trainer's and the
 * loader's, NOMEM. */
stk_status stk_lr_find(stk_model *model, stk_loader *l, stk_h2d *h, const stk_lr_find_options *o,
                       stk_lr_sweep *s);

#ifdef __cplusplus
}
#endif
