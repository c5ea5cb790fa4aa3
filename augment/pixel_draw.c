/* Random pixel ops drawn into deterministic ones, as torchvision's classes
 * draw them (transforms.py, autoaugment.py of torchvision 0.14). The random
 * numbers are Philox's (common/rng.h), not torch's: the distributions are
 * torchvision's, the values for a given seed are not. */
#include "augment/pixel_ops.h"

#include <math.h>

/* The policies' op set, in _augmentation_space's order (the index is what
 * torch.randint draws). */
enum {
    P_IDENTITY,
    P_SHEARX,
    P_SHEARY,
    P_TRANSLATEX,
    P_TRANSLATEY,
    P_ROTATE,
    P_BRIGHTNESS,
    P_COLOR,
    P_CONTRAST,
    P_SHARPNESS,
    P_POSTERIZE,
    P_SOLARIZE,
    P_AUTOCONTRAST,
    P_EQUALIZE,
    P_COUNT
};

static const char *const POLICY_NAMES[P_COUNT] = {
    "Identity", "ShearX",   "ShearY",    "TranslateX", "TranslateY", "Rotate",       "Brightness",
    "Color",    "Contrast", "Sharpness", "Posterize",  "Solarize",   "AutoContrast", "Equalize"};

int stk_pixel_policy_op_count(void) { return P_COUNT; }

const char *stk_pixel_policy_op_name(int index)
{
    return index >= 0 && index < P_COUNT ? POLICY_NAMES[index] : "?";
}

/* torch.linspace(start, end, steps)[i] in float32 (its two-ended formula). */
static double linspace(double start, double end, int steps, int i)
{
    if (steps == 1) return (float)start;
    float s = (float)start, e = (float)end, step = (e - s) / (float)(steps - 1);
    return i < steps / 2 ? s + step * (float)i : e - step * (float)(steps - i - 1);
}

double stk_pixel_policy_magnitude(stk_pixel_op_kind policy, int index, int bin, int bins, int w,
                                  int h)
{
    bool wide = policy == STK_OP_TRIVIALAUGMENT;
    switch (index) {
    case P_SHEARX:
    case P_SHEARY: return linspace(0.0, wide ? 0.99 : 0.3, bins, bin);
    case P_TRANSLATEX: return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * w, bins, bin);
    case P_TRANSLATEY: return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * h, bins, bin);
    case P_ROTATE: return linspace(0.0, wide ? 135.0 : 30.0, bins, bin);
    case P_BRIGHTNESS:
    case P_COLOR:
    case P_CONTRAST:
    case P_SHARPNESS: return linspace(0.0, wide ? 0.99 : 0.9, bins, bin);
    case P_POSTERIZE: /* 8 - round(i / ((bins - 1) / 4 or 6)) */
        return 8 - nearbyintf((float)bin / (float)((bins - 1) / (wide ? 6.0 : 4.0)));
    case P_SOLARIZE: return linspace(255.0, 0.0, bins, bin);
    default: return 0.0;
    }
}

static bool policy_signed(int index) { return index >= P_SHEARX && index <= P_SHARPNESS; }

/* _apply_op(img, op_name, magnitude) as a deterministic op. */
static stk_pixel_op policy_op(int index, double m)
{
    stk_pixel_op op = {.kind = STK_OP_BRIGHTNESS, .arg = {1.0}}; /* identity: x1 */
    switch (index) {
    case P_SHEARX: op = (stk_pixel_op){STK_OP_SHEARX, {m}}; break;
    case P_SHEARY: op = (stk_pixel_op){STK_OP_SHEARY, {m}}; break;
    case P_TRANSLATEX: op = (stk_pixel_op){STK_OP_TRANSLATEX, {m}}; break;
    case P_TRANSLATEY: op = (stk_pixel_op){STK_OP_TRANSLATEY, {m}}; break;
    case P_ROTATE: op = (stk_pixel_op){STK_OP_ROTATE, {m}}; break;
    case P_BRIGHTNESS: op = (stk_pixel_op){STK_OP_BRIGHTNESS, {1.0 + m}}; break;
    case P_COLOR: op = (stk_pixel_op){STK_OP_SATURATION, {1.0 + m}}; break;
    case P_CONTRAST: op = (stk_pixel_op){STK_OP_CONTRAST, {1.0 + m}}; break;
    case P_SHARPNESS: op = (stk_pixel_op){STK_OP_SHARPNESS, {1.0 + m}}; break;
    case P_POSTERIZE: op = (stk_pixel_op){STK_OP_POSTERIZE, {(int)m}}; break;
    case P_SOLARIZE: op = (stk_pixel_op){STK_OP_SOLARIZE, {m}}; break;
    case P_AUTOCONTRAST: op = (stk_pixel_op){STK_OP_AUTOCONTRAST, {0}}; break;
    case P_EQUALIZE: op = (stk_pixel_op){STK_OP_EQUALIZE, {0}}; break;
    default: break;
    }
    return op;
}

static double uniform(stk_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * stk_rng_uniform(r);
}

/* Append op unless out is full. */
static void put(stk_pixel_op *out, int *n, stk_pixel_op op)
{
    if (*n < STK_PIXEL_MAX_DRAWN) out[(*n)++] = op;
}

/* ColorJitter: the four factors drawn, applied in a random order; a zero
 * argument (torchvision's None) is skipped. */
static void colorjitter(const double *a, stk_rng *r, stk_pixel_op *out, int *n)
{
    int order[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; i--) { /* torch.randperm(4) */
        int j = (int)stk_rng_below(r, (uint32_t)i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    double f[4];
    for (int i = 0; i < 3; i++) f[i] = a[i] > 0 ? uniform(r, fmax(0.0, 1.0 - a[i]), 1.0 + a[i]) : 0;
    f[3] = a[3] > 0 ? uniform(r, -a[3], a[3]) : 0;
    static const stk_pixel_op_kind kinds[4] = {STK_OP_BRIGHTNESS, STK_OP_CONTRAST,
                                               STK_OP_SATURATION, STK_OP_HUE};
    for (int i = 0; i < 4; i++)
        if (a[order[i]] > 0) put(out, n, (stk_pixel_op){kinds[order[i]], {f[order[i]]}});
}

static void random_affine(const double *a, stk_rng *r, int w, int h, stk_pixel_op *out, int *n)
{
    double angle = uniform(r, -a[0], a[0]);
    double max_dx = a[1] * w, max_dy = a[2] * h;
    double tx = a[1] > 0 ? nearbyint(uniform(r, -max_dx, max_dx)) : 0;
    double ty = a[2] > 0 ? nearbyint(uniform(r, -max_dy, max_dy)) : 0;
    double scale = a[3] != 1 || a[4] != 1 ? uniform(r, a[3], a[4]) : 1.0;
    double shear = a[5] > 0 ? uniform(r, -a[5], a[5]) : 0;
    put(out, n, (stk_pixel_op){STK_OP_AFFINE, {angle, tx, ty, scale, shear, 0, 0}});
}

static void policy(const stk_pixel_op *op, stk_rng *r, int w, int h, stk_pixel_op *out, int *n)
{
    bool trivial = op->kind == STK_OP_TRIVIALAUGMENT;
    int count = trivial ? 1 : (int)op->arg[0];
    int bins = (int)(trivial ? op->arg[0] : op->arg[2]);
    for (int k = 0; k < count; k++) {
        int index = (int)stk_rng_below(r, P_COUNT);
        int bin = trivial ? (int)stk_rng_below(r, (uint32_t)bins) : (int)op->arg[1];
        double m = stk_pixel_policy_magnitude(op->kind, index, bin, bins, w, h);
        if (policy_signed(index) && stk_rng_below(r, 2)) m = -m;
        if (index != P_IDENTITY) put(out, n, policy_op(index, m));
    }
}

/* The Random* classes that apply a fixed op with probability p. */
static void maybe(stk_rng *r, double p, stk_pixel_op op, stk_pixel_op *out, int *n)
{
    if (stk_rng_uniform(r) < p) put(out, n, op);
}

int stk_pixel_ops_draw(const stk_pixel_op *ops, int n_ops, stk_rng *r, int w, int h,
                       stk_pixel_op *out)
{
    int n = 0;
    for (int i = 0; i < n_ops; i++) {
        const double *a = ops[i].arg;
        switch (ops[i].kind) {
        case STK_OP_COLORJITTER: colorjitter(a, r, out, &n); break;
        case STK_OP_RANDOM_GRAYSCALE:
            maybe(r, a[0], (stk_pixel_op){STK_OP_GRAYSCALE}, out, &n);
            break;
        case STK_OP_RANDOM_ROTATION:
            put(out, &n, (stk_pixel_op){STK_OP_ROTATE, {uniform(r, a[0], a[1])}});
            break;
        case STK_OP_RANDOM_AFFINE: random_affine(a, r, w, h, out, &n); break;
        case STK_OP_GAUSSIAN_BLUR:
            put(out, &n, (stk_pixel_op){STK_OP_BLUR, {a[0], uniform(r, a[1], a[2])}});
            break;
        case STK_OP_RANDOM_AUTOCONTRAST:
            maybe(r, a[0], (stk_pixel_op){STK_OP_AUTOCONTRAST}, out, &n);
            break;
        case STK_OP_RANDOM_EQUALIZE:
            maybe(r, a[0], (stk_pixel_op){STK_OP_EQUALIZE}, out, &n);
            break;
        case STK_OP_RANDOM_INVERT: maybe(r, a[0], (stk_pixel_op){STK_OP_INVERT}, out, &n); break;
        case STK_OP_RANDOM_POSTERIZE:
            maybe(r, a[1], (stk_pixel_op){STK_OP_POSTERIZE, {a[0]}}, out, &n);
            break;
        case STK_OP_RANDOM_SOLARIZE:
            maybe(r, a[1], (stk_pixel_op){STK_OP_SOLARIZE, {a[0]}}, out, &n);
            break;
        case STK_OP_RANDOM_SHARPNESS:
            maybe(r, a[1], (stk_pixel_op){STK_OP_SHARPNESS, {a[0]}}, out, &n);
            break;
        case STK_OP_RANDAUGMENT:
        case STK_OP_TRIVIALAUGMENT: policy(&ops[i], r, w, h, out, &n); break;
        default: put(out, &n, ops[i]); break;
        }
    }
    return n;
}
