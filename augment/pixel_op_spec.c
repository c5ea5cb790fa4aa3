/* The pixel ops' spec tokens: names, arguments, defaults and ranges. */
#include "augment/pixel_ops.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_syntax {
    const char *name;
    stk_pixel_op_kind kind;
    int min_args, max_args;
    double def[7];       /* defaults of the arguments not given */
    double lo[7], hi[7]; /* each argument's range */
    unsigned integer;    /* bit i: argument i is an integer */
    const char *usage;   /* the message when the arguments are wrong */
} op_syntax;

#define P01    0.0, 1.0
#define FACTOR 0.0, 1000.0
static const op_syntax SYNTAX[] = {
    {"brightness",
     STK_OP_BRIGHTNESS,
     1,
     1,
     {0},
     {0},
     {1000},
     0,
     "expected brightness:FACTOR (>= 0)"},
    {"contrast", STK_OP_CONTRAST, 1, 1, {0}, {0}, {1000}, 0, "expected contrast:FACTOR (>= 0)"},
    {"saturation",
     STK_OP_SATURATION,
     1,
     1,
     {0},
     {0},
     {1000},
     0,
     "expected saturation:FACTOR (>= 0)"},
    {"hue", STK_OP_HUE, 1, 1, {0}, {-0.5}, {0.5}, 0, "expected hue:FACTOR (-0.5..0.5)"},
    {"grayscale", STK_OP_GRAYSCALE, 0, 0, {0}, {0}, {0}, 0, "grayscale takes no arguments"},
    {"invert", STK_OP_INVERT, 0, 0, {0}, {0}, {0}, 0, "invert takes no arguments"},
    {"autocontrast",
     STK_OP_AUTOCONTRAST,
     0,
     0,
     {0},
     {0},
     {0},
     0,
     "autocontrast takes no arguments"},
    {"equalize", STK_OP_EQUALIZE, 0, 0, {0}, {0}, {0}, 0, "equalize takes no arguments"},
    {"posterize", STK_OP_POSTERIZE, 1, 1, {0}, {0}, {8}, 1, "expected posterize:BITS (0..8)"},
    {"solarize", STK_OP_SOLARIZE, 1, 1, {0}, {0}, {256}, 0, "expected solarize:THRESHOLD (0..256)"},
    {"sharpness", STK_OP_SHARPNESS, 1, 1, {0}, {0}, {1000}, 0, "expected sharpness:FACTOR (>= 0)"},
    {"blur",
     STK_OP_BLUR,
     1,
     2,
     {0, 0},
     {1, 1e-3},
     {255, 100},
     1,
     "expected blur:KERNEL[:SIGMA] (odd kernel 1..255, sigma 0.001..100)"},
    {"rotate", STK_OP_ROTATE, 1, 1, {0}, {-360}, {360}, 0, "expected rotate:DEGREES (-360..360)"},
    {"affine",
     STK_OP_AFFINE,
     1,
     6,
     {0, 0, 0, 1, 0, 0},
     {-360, -65535, -65535, 0.01, -89, -89},
     {360, 65535, 65535, 100, 89, 89},
     0,
     "expected affine:ANGLE[:TX:TY[:SCALE[:SHEAR_X[:SHEAR_Y]]]] (degrees, pixels, scale "
     "0.01..100, shears -89..89 degrees)"},
    {"shearx", STK_OP_SHEARX, 1, 1, {0}, {-10}, {10}, 0, "expected shearx:MAGNITUDE (-10..10)"},
    {"sheary", STK_OP_SHEARY, 1, 1, {0}, {-10}, {10}, 0, "expected sheary:MAGNITUDE (-10..10)"},
    {"translatex",
     STK_OP_TRANSLATEX,
     1,
     1,
     {0},
     {-65535},
     {65535},
     0,
     "expected translatex:PIXELS"},
    {"translatey",
     STK_OP_TRANSLATEY,
     1,
     1,
     {0},
     {-65535},
     {65535},
     0,
     "expected translatey:PIXELS"},
    {"colorjitter",
     STK_OP_COLORJITTER,
     1,
     4,
     {0, 0, 0, 0},
     {0, 0, 0, 0},
     {1000, 1000, 1000, 0.5},
     0,
     "expected colorjitter:BRIGHTNESS[:CONTRAST[:SATURATION[:HUE]]] (>= 0; hue 0..0.5)"},
    {"randomgrayscale",
     STK_OP_RANDOM_GRAYSCALE,
     0,
     1,
     {0.1},
     {0},
     {1},
     0,
     "expected randomgrayscale[:P] (0..1)"},
    {"randomrotation",
     STK_OP_RANDOM_ROTATION,
     1,
     2,
     {0, 0},
     {-360, -360},
     {360, 360},
     0,
     "expected randomrotation:DEGREES (angles in -DEGREES..DEGREES) or randomrotation:MIN:MAX"},
    {"randomaffine",
     STK_OP_RANDOM_AFFINE,
     1,
     6,
     {0, 0, 0, 1, 1, 0},
     {0, 0, 0, 0.01, 0.01, 0},
     {360, 1, 1, 100, 100, 89},
     0,
     "expected randomaffine:DEGREES[:TRANSLATE_X:TRANSLATE_Y[:SCALE_MIN:SCALE_MAX[:SHEAR]]] "
     "(translate fractions 0..1, scales 0.01..100, shear 0..89 degrees)"},
    {"gaussianblur",
     STK_OP_GAUSSIAN_BLUR,
     1,
     3,
     {0, 0.1, 2.0},
     {1, 1e-3, 1e-3},
     {255, 100, 100},
     1,
     "expected gaussianblur:KERNEL[:SIGMA_MIN[:SIGMA_MAX]] (odd kernel 1..255, sigmas 0.001..100)"},
    {"randomautocontrast",
     STK_OP_RANDOM_AUTOCONTRAST,
     0,
     1,
     {0.5},
     {0},
     {1},
     0,
     "expected randomautocontrast[:P] (0..1)"},
    {"randomequalize",
     STK_OP_RANDOM_EQUALIZE,
     0,
     1,
     {0.5},
     {0},
     {1},
     0,
     "expected randomequalize[:P] (0..1)"},
    {"randominvert",
     STK_OP_RANDOM_INVERT,
     0,
     1,
     {0.5},
     {0},
     {1},
     0,
     "expected randominvert[:P] (0..1)"},
    {"randomposterize",
     STK_OP_RANDOM_POSTERIZE,
     1,
     2,
     {0, 0.5},
     {0, 0},
     {8, 1},
     1,
     "expected randomposterize:BITS[:P] (bits 0..8, p 0..1)"},
    {"randomsolarize",
     STK_OP_RANDOM_SOLARIZE,
     1,
     2,
     {0, 0.5},
     {0, 0},
     {256, 1},
     0,
     "expected randomsolarize:THRESHOLD[:P] (threshold 0..256, p 0..1)"},
    {"randomsharpness",
     STK_OP_RANDOM_SHARPNESS,
     1,
     2,
     {0, 0.5},
     {0, 0},
     {1000, 1},
     0,
     "expected randomsharpness:FACTOR[:P] (factor >= 0, p 0..1)"},
    {"randaugment",
     STK_OP_RANDAUGMENT,
     0,
     3,
     {2, 9, 31},
     {0, 0, 2},
     {16, 999, 1000},
     7,
     "expected randaugment[:NUM_OPS[:MAGNITUDE[:BINS]]] (num_ops 0..16, magnitude below bins, "
     "bins 2..1000; default 2:9:31)"},
    {"trivialaugment",
     STK_OP_TRIVIALAUGMENT,
     0,
     1,
     {31},
     {2},
     {1000},
     1,
     "expected trivialaugment[:BINS] (2..1000; default 31)"},
};
#define N_SYNTAX (sizeof SYNTAX / sizeof SYNTAX[0])

static const op_syntax *syntax_of(stk_pixel_op_kind kind)
{
    for (size_t i = 0; i < N_SYNTAX; i++)
        if (SYNTAX[i].kind == kind) return &SYNTAX[i];
    return NULL;
}

const char *stk_pixel_op_name(stk_pixel_op_kind kind)
{
    const op_syntax *s = syntax_of(kind);
    return s ? s->name : "?";
}

static bool parse_number(const char *s, bool integer, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    if (integer && v != floor(v)) return false;
    *out = v;
    return true;
}

int stk_pixel_op_parse(const char *name, char *const *args, int nargs, stk_pixel_op *op,
                       const char **why)
{
    const op_syntax *s = NULL;
    for (size_t i = 0; i < N_SYNTAX && !s; i++)
        if (strcmp(SYNTAX[i].name, name) == 0) s = &SYNTAX[i];
    if (!s) return 0;
    *why = s->usage;
    if (nargs < s->min_args || nargs > s->max_args) return -1;
    memset(op, 0, sizeof *op);
    op->kind = s->kind;
    for (int i = 0; i < 7; i++) op->arg[i] = s->def[i];
    for (int i = 0; i < nargs; i++) {
        double v;
        if (!parse_number(args[i], s->integer >> i & 1, &v) || v < s->lo[i] || v > s->hi[i])
            return -1;
        op->arg[i] = v;
    }
    double *a = op->arg;
    switch (s->kind) {
    case STK_OP_BLUR:
    case STK_OP_GAUSSIAN_BLUR:
        if ((int)a[0] % 2 == 0) return -1;
        /* torchvision's gaussian_blur default: sigma from the kernel size. */
        if (s->kind == STK_OP_BLUR && nargs == 1) a[1] = 0.3 * ((a[0] - 1) * 0.5 - 1) + 0.8;
        if (s->kind == STK_OP_GAUSSIAN_BLUR && nargs == 2) a[2] = a[1];
        if (s->kind == STK_OP_GAUSSIAN_BLUR && a[1] > a[2]) return -1;
        if (!(a[1] > 0)) return -1;
        break;
    case STK_OP_RANDOM_ROTATION:
        if (nargs == 1) {
            if (a[0] < 0) return -1;
            a[1] = a[0], a[0] = -a[0];
        }
        if (a[0] > a[1]) return -1;
        break;
    case STK_OP_RANDOM_AFFINE:
        if (nargs == 2 || nargs == 4) return -1;
        if (nargs >= 5 && a[3] > a[4]) return -1;
        break;
    case STK_OP_RANDAUGMENT:
        if (a[1] >= a[2]) return -1;
        break;
    default: break;
    }
    return 1;
}

void stk_pixel_op_format(const stk_pixel_op *op, char *buf, size_t size)
{
    const op_syntax *s = syntax_of(op->kind);
    if (!s) return;
    size_t n = strlen(buf);
    n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? "," : "", s->name);
    /* Every argument up to the last one that differs from its default. */
    int last = 0;
    for (int i = 0; i < s->max_args; i++)
        if (op->arg[i] != s->def[i] || i < s->min_args) last = i + 1;
    if (op->kind == STK_OP_RANDOM_ROTATION) last = 2;
    if (op->kind == STK_OP_BLUR) last = 2;
    /* Arguments that come in pairs: never half of one. */
    if (op->kind == STK_OP_RANDOM_AFFINE && (last == 2 || last == 4)) last++;
    if (op->kind == STK_OP_GAUSSIAN_BLUR && last == 2) last = 3;
    for (int i = 0; i < last; i++)
        n += (size_t)snprintf(buf + n, n < size ? size - n : 0, ":%.9g", op->arg[i]);
}
