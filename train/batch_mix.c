/* RandomErasing, mixup and cutmix on the device batch (batch_mix.h). */
#include "train/batch_mix.h"

#include "common/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool stk_batch_mix_enabled(const stk_batch_mix_config *c)
{
    return c->erase > 0 || ((c->mixup_alpha > 0 || c->cutmix_alpha > 0) && c->mix_prob > 0);
}

stk_status stk_batch_mix_check(const stk_batch_mix_config *c)
{
    const struct {
        const char *name;
        float v, hi;
    } v[] = {{"erase probability", c->erase, 1},
             {"mixup alpha", c->mixup_alpha, 100},
             {"cutmix alpha", c->cutmix_alpha, 100},
             {"--mix-prob", c->mix_prob, 1},
             {"mix switch probability", c->switch_prob, 1}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!(v[i].v >= 0 && v[i].v <= v[i].hi))
            return stk_error(STK_ERR_INVALID_ARG, "%s %g: expected 0..%g", v[i].name,
                             (double)v[i].v, (double)v[i].hi);
    return STK_OK;
}

/* ---- distributions (numpy's, drawn from Philox) ----------------------- */

static double uniform(stk_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * stk_rng_uniform(r);
}

static double normal(stk_rng *r)
{
    double u1 = 1.0 - stk_rng_uniform(r), u2 = stk_rng_uniform(r); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

/* Gamma(a, 1): Marsaglia and Tsang's method; a < 1 through Gamma(a + 1). */
static double gamma_draw(stk_rng *r, double a)
{
    if (a < 1.0) {
        double u = 1.0 - stk_rng_uniform(r);
        return gamma_draw(r, a + 1.0) * pow(u, 1.0 / a);
    }
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = normal(r), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = stk_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (u > 0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

static double beta_draw(stk_rng *r, double a)
{
    double x = gamma_draw(r, a), y = gamma_draw(r, a);
    return x + y > 0 ? x / (x + y) : 0.5;
}

/* ---- the draws ---------------------------------------------------------- */

/* torchvision's RandomErasing.get_params: scale (0.02, 0.33), ratio (0.3,
 * 3.3), 10 attempts; value 0. An empty region when not erased. */
static bool erase_box(stk_rng *r, int h, int w, stk_batch_region *out)
{
    double area = (double)h * w, lr0 = log(0.3), lr1 = log(3.3);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(r, 0.02, 0.33), aspect = exp(uniform(r, lr0, lr1));
        int eh = (int)lround(sqrt(target * aspect)), ew = (int)lround(sqrt(target / aspect));
        if (!(eh < h && ew < w)) continue;
        int i = (int)stk_rng_below(r, (uint32_t)(h - eh + 1));
        int j = (int)stk_rng_below(r, (uint32_t)(w - ew + 1));
        *out = (stk_batch_region){i, i + eh, j, j + ew, 0, 0.f, 0.f};
        return true;
    }
    return false;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void stk_batch_mix_plan(const stk_batch_mix_config *c, uint64_t seed, uint64_t step, int n, int h,
                        int w, stk_batch_region *erase, stk_batch_region *mix,
                        stk_batch_mix_draw *d)
{
    stk_rng r;
    /* stream: "mix" in the top bits, apart from the loader's streams; the rank below */
    stk_rng_init(&r, seed, 0x6d69780000000000ull + (uint64_t)(uint32_t)c->rank, step << 20);
    *d = (stk_batch_mix_draw){.lam = 1.f};
    for (int i = 0; i < n; i++) {
        erase[i] = (stk_batch_region){0, 0, 0, 0, i, 0.f, 0.f};
        if (c->erase > 0 && stk_rng_uniform(&r) < c->erase && erase_box(&r, h, w, &erase[i]))
            erase[i].partner = i, d->erased++;
    }
    /* timm's _params_per_batch */
    bool mixup = c->mixup_alpha > 0, cutmix = c->cutmix_alpha > 0;
    if (!(mixup || cutmix) || !(stk_rng_uniform(&r) < c->mix_prob)) return;
    bool use_cutmix = cutmix && (!mixup || stk_rng_uniform(&r) < c->switch_prob);
    double lam = beta_draw(&r, use_cutmix ? c->cutmix_alpha : c->mixup_alpha);
    if (lam >= 1.0) return;
    d->cutmix = use_cutmix;
    if (!use_cutmix) {
        for (int i = 0; i < n; i++)
            mix[i] = (stk_batch_region){0, h, 0, w, n - 1 - i, (float)lam, (float)(1.0 - lam)};
        d->lam = (float)lam;
        return;
    }
    /* rand_bbox + correct_lam: a box of sqrt(1 - lam) of each side, centre
     * uniform over the image, clipped; lam from the box's real area */
    double ratio = sqrt(1.0 - lam);
    int cut_h = (int)(h * ratio), cut_w = (int)(w * ratio);
    int cy = (int)stk_rng_below(&r, (uint32_t)h), cx = (int)stk_rng_below(&r, (uint32_t)w);
    int y0 = clampi(cy - cut_h / 2, 0, h), y1 = clampi(cy + cut_h / 2, 0, h);
    int x0 = clampi(cx - cut_w / 2, 0, w), x1 = clampi(cx + cut_w / 2, 0, w);
    for (int i = 0; i < n; i++) mix[i] = (stk_batch_region){y0, y1, x0, x1, n - 1 - i, 0.f, 1.f};
    d->lam = (float)(1.0 - (double)(y1 - y0) * (x1 - x0) / ((double)h * w));
}

stk_status stk_batch_mix_apply(const stk_batch_mix_config *c, uint64_t seed, uint64_t step,
                               stk_tensor *x, const int32_t *host_labels, stk_tensor **x_out,
                               stk_tensor **labels2, float *lam)
{
    *x_out = x;
    *labels2 = NULL;
    *lam = 1.f;
    int n = (int)stk_tensor_dim(x, 0), h = (int)stk_tensor_dim(x, 2), w = (int)stk_tensor_dim(x, 3);
    stk_batch_region *regions = malloc(2 * (size_t)(n ? n : 1) * sizeof *regions);
    int32_t *flipped = malloc((size_t)(n ? n : 1) * sizeof *flipped);
    stk_status st = STK_OK;
    if (!regions || !flipped) {
        st = stk_error(STK_ERR_NOMEM, "no memory for the batch transforms of %d samples", n);
        goto done;
    }
    stk_batch_mix_draw d;
    stk_batch_mix_plan(c, seed, step, n, h, w, regions, regions + n, &d);
    if (d.erased && (st = stk_batch_regions(*x_out, regions, x_out)) != STK_OK) goto done;
    if (d.lam < 1.f) {
        if ((st = stk_batch_regions(*x_out, regions + n, x_out)) != STK_OK) goto done;
        for (int i = 0; i < n; i++) flipped[i] = host_labels[n - 1 - i];
        int64_t shape[1] = {n};
        if ((st = stk_tensor_zeros_on(stk_tensor_device(x), STK_I32, 1, shape, labels2)) !=
                STK_OK ||
            (st = stk_tensor_copy_from_host(*labels2, flipped, (size_t)n * sizeof *flipped)) !=
                STK_OK)
            goto done;
        *lam = d.lam;
    }
done:
    free(regions);
    free(flipped);
    return st;
}

stk_status stk_batch_mix_loss(stk_tensor *logits, stk_tensor *labels, stk_tensor *labels2,
                              float lam, float smoothing, stk_tensor **loss)
{
    if (!labels2) return stk_cross_entropy(logits, labels, smoothing, loss);
    stk_tensor *a, *b, *wa, *wb;
    STK_TRY(stk_cross_entropy(logits, labels, smoothing, &a));
    STK_TRY(stk_cross_entropy(logits, labels2, smoothing, &b));
    STK_TRY(stk_mul_scalar(a, lam, &wa));
    STK_TRY(stk_mul_scalar(b, 1.f - lam, &wb));
    return stk_add(wa, wb, loss);
}
