/* The batch transforms of a training step, on the device batch after
 * normalisation: RandomErasing (torchvision's, per sample), and mixup or
 * cutmix (timm's Mixup in batch mode: one of them per batch, with
 * probability mix_prob, cutmix chosen with switch_prob when both are on;
 * the partner of sample n is N-1-n, x.flip(0)), with the loss's target
 * mixed: lam * CE(y) + (1 - lam) * CE(y.flip(0)), each with the run's label
 * smoothing, which is timm's SoftTargetCrossEntropy of mixup_target().
 *
 *     stk_batch_mix_config c = {.erase = 0.25f, .mixup_alpha = 0.2f, .cutmix_alpha = 1.0f,
 *                               .mix_prob = 1.0f, .switch_prob = 0.5f};
 *     stk_batch_mix_draw d;
 *     stk_batch_mix_plan(&c, seed, step, n, h, w, regions_erase, regions_mix, &d);
 *     // d.erased samples to erase (regions_erase), d.lam < 1: mix with regions_mix
 *     STK_TRY(stk_batch_mix_apply(&c, seed, step, x, labels, host_labels, &x2, &labels2, &lam));
 *
 * Random numbers: Philox keyed by (seed, rank, step), so a resumed run draws the
 * same boxes and lambdas; not numpy's, so a seed gives other values than timm.
 * Evaluation never applies them.
 */
#pragma once

#include "common/status.h"
#include "engine/ops.h"
#include "engine/tensor.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_batch_mix_config {
    float erase;        /* RandomErasing probability per sample (0: off) */
    float mixup_alpha;  /* Beta(alpha, alpha) for mixup's lam (0: off) */
    float cutmix_alpha; /* Beta(alpha, alpha) for cutmix's box (0: off) */
    float mix_prob;     /* probability that a batch is mixed at all (timm's prob) */
    float switch_prob;  /* both on: probability of cutmix rather than mixup (timm's 0.5) */
    int rank;           /* data-parallel rank: each rank draws its own boxes and lambdas */
} stk_batch_mix_config;

/* Whether c asks for any batch transform. */
bool stk_batch_mix_enabled(const stk_batch_mix_config *c);

/* Check ranges: erase, mix_prob, switch_prob in [0, 1]; alphas in [0, 100].
 * Errors: STK_ERR_INVALID_ARG naming the value. */
stk_status stk_batch_mix_check(const stk_batch_mix_config *c);

typedef struct stk_batch_mix_draw {
    int erased;  /* samples given an erased box (erase regions) */
    bool cutmix; /* the mix, when lam < 1, is cutmix (else mixup) */
    float lam;   /* the weight of each sample's own label (1: not mixed);
                    cutmix: 1 - box area / image area, as timm's correct_lam */
} stk_batch_mix_draw;

/* Draw one step's transforms for n samples of h x w: erase[n] (erased
 * samples get their box, the others an empty one) and mix[n] (when
 * d->lam < 1). */
void stk_batch_mix_plan(const stk_batch_mix_config *c, uint64_t seed, uint64_t step, int n, int h,
                        int w, stk_batch_region *erase, stk_batch_region *mix,
                        stk_batch_mix_draw *d);

/* Apply the step's transforms to x (f32 [N, C, H, W]) and give the mixed
 * labels: *x_out (x itself when nothing applies), *labels2 (labels flipped
 * along the batch; NULL when not mixed), *lam. host_labels: the N labels.
 * Errors: the ops' (NOMEM, a device error). */
stk_status stk_batch_mix_apply(const stk_batch_mix_config *c, uint64_t seed, uint64_t step,
                               stk_tensor *x, const int32_t *host_labels, stk_tensor **x_out,
                               stk_tensor **labels2, float *lam);

/* The loss of a step with mixed labels: lam * cross_entropy(logits, labels,
 * smoothing) + (1 - lam) * cross_entropy(logits, labels2, smoothing);
 * labels2 NULL: the plain cross-entropy. */
stk_status stk_batch_mix_loss(stk_tensor *logits, stk_tensor *labels, stk_tensor *labels2,
                              float lam, float smoothing, stk_tensor **loss);

#ifdef __cplusplus
}
#endif
