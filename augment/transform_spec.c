#include "augment/transform_spec.h"

#include "common/text.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 16384

static stk_status bad(const char *token, const char *why)
{
    return stk_error(STK_ERR_INVALID_ARG, "transform \"%s\": %s", token, why);
}

/* Parse an integer argument in [lo, hi]. */
static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Split "a:b:c" in place into at most n fields; returns the count. */
static int split(char *s, char sep, char **fields, int n)
{
    int k = 0;
    while (k < n) {
        fields[k++] = s;
        char *p = strchr(s, sep);
        if (!p) break;
        *p = '\0';
        s = p + 1;
    }
    return strchr(fields[k - 1], sep) ? n + 1 : k;
}

static stk_status parse_norm(char *arg, const char *token, stk_transform *t)
{
    if (!arg) {
        t->norm = STK_NORM_DATASET;
        return STK_OK;
    }
    if (strcmp(arg, "imagenet") == 0) {
        t->norm = STK_NORM_IMAGENET;
        return STK_OK;
    }
    if (strcmp(arg, "dataset") == 0) {
        t->norm = STK_NORM_DATASET;
        return STK_OK;
    }
    char *slash = strchr(arg, '/');
    if (!slash) return bad(token, "expected norm, norm:imagenet or norm:MEAN/STD");
    *slash = '\0';
    char *m[4], *s[4];
    int nm = split(arg, ':', m, 3), ns = split(slash + 1, ':', s, 3);
    if (nm != ns || (nm != 1 && nm != 3)) return bad(token, "give 1 or 3 means and as many stds");
    for (int i = 0; i < nm; i++) {
        double mean, std;
        if (!parse_double(m[i], &mean) || !parse_double(s[i], &std))
            return bad(token, "means and stds must be numbers");
        if (!(std > 0)) return bad(token, "std must be positive");
        /* Kept well inside float range: scale 1/(255 std) and bias -mean/std stay finite. */
        if (!(fabs(mean) <= 1e6 && std >= 1e-6 && std <= 1e6))
            return bad(token, "means must lie within -1e6..1e6 and stds within 1e-6..1e6");
        t->mean[i] = (float)mean;
        t->std[i] = (float)std;
    }
    for (int i = nm; i < 3; i++) t->mean[i] = t->mean[0], t->std[i] = t->std[0];
    t->norm = STK_NORM_EXPLICIT;
    t->norm_values = nm;
    return STK_OK;
}

/* An unknown token: the known ones, and the nearest to what was typed. */
static stk_status unknown(const char *name, const char *orig)
{
    static const char *const own[] = {"rrc",  "resize", "center", "pad",   "crop",  "flip",
                                      "norm", "none",   "erase",  "mixup", "cutmix"};
    const char *names[64];
    int n = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) names[n++] = own[i];
    for (int k = 0; k < STK_OP_KIND_COUNT && n < 64; k++)
        names[n++] = stk_pixel_op_name((stk_pixel_op_kind)k);
    const char *hint = stk_text_closest(name, strlen(name), names, n);
    char mean[64] = "";
    if (hint) snprintf(mean, sizeof mean, "did you mean %s? ", hint);
    return stk_error(STK_ERR_INVALID_ARG,
                     "transform \"%s\": unknown transform (%sknown: rrc, resize, center, pad, "
                     "crop, flip, norm, none; the batch transforms erase, mixup, cutmix; the pixel "
                     "ops: colorjitter, randomgrayscale, randomrotation, randomaffine, "
                     "gaussianblur, randomautocontrast, randomequalize, randominvert, "
                     "randomposterize, randomsolarize, randomsharpness, randaugment, "
                     "trivialaugment; brightness, contrast, saturation, hue, grayscale, invert, "
                     "autocontrast, equalize, posterize, solarize, sharpness, blur, rotate, "
                     "affine, shearx, sheary, translatex, translatey)",
                     orig, mean);
}

static stk_status parse_token(char *token, const char *orig, stk_transform *t)
{
    char *args[9];
    int n = split(token, ':', args, 8);
    const char *name = args[0];
    int nargs = n - 1;
    if (strcmp(name, "none") == 0 && nargs == 0) {
        t->none = true;
    } else if (strcmp(name, "rrc") == 0) {
        if (nargs != 1 && nargs != 3)
            return bad(orig, "expected rrc:SIZE or rrc:SIZE:SCALE_MIN:SCALE_MAX");
        if (!parse_int(args[1], 1, MAX_SIDE, &t->rrc)) return bad(orig, "size must be 1..16384");
        if (nargs == 3 &&
            (!parse_double(args[2], &t->scale[0]) || !parse_double(args[3], &t->scale[1]) ||
             !(t->scale[0] > 0) || t->scale[0] > t->scale[1] || t->scale[1] > 1))
            return bad(orig, "scale range must satisfy 0 < min <= max <= 1");
    } else if (strcmp(name, "resize") == 0 || strcmp(name, "center") == 0 ||
               strcmp(name, "crop") == 0 || strcmp(name, "pad") == 0) {
        int *field = name[0] == 'r'                     ? &t->resize
                     : name[0] == 'c' && name[1] == 'e' ? &t->center
                     : name[0] == 'c'                   ? &t->crop
                                                        : &t->pad;
        if (nargs != 1) return bad(orig, "expected one size, e.g. resize:256");
        if (!parse_int(args[1], name[0] == 'p' ? 0 : 1, MAX_SIDE, field))
            return bad(orig, "size must be 1..16384 (pad: 0..16384)");
    } else if (strcmp(name, "flip") == 0) {
        t->flip = 0.5;
        if (nargs > 1) return bad(orig, "expected flip or flip:P");
        if (nargs == 1 && (!parse_double(args[1], &t->flip) || t->flip < 0 || t->flip > 1))
            return bad(orig, "probability must be in 0..1");
    } else if (strcmp(name, "erase") == 0) {
        t->erase = 0.5; /* torchvision's RandomErasing default */
        if (nargs > 1) return bad(orig, "expected erase or erase:P");
        if (nargs == 1 && (!parse_double(args[1], &t->erase) || !(t->erase > 0 && t->erase <= 1)))
            return bad(orig, "probability must be in (0, 1]");
    } else if (strcmp(name, "mixup") == 0 || strcmp(name, "cutmix") == 0) {
        double *alpha = name[0] == 'm' ? &t->mixup : &t->cutmix;
        if (nargs != 1 || !parse_double(args[1], alpha) || !(*alpha > 0 && *alpha <= 100))
            return bad(orig, name[0] == 'm' ? "expected mixup:ALPHA (0 < alpha <= 100)"
                                            : "expected cutmix:ALPHA (0 < alpha <= 100)");
    } else if (strcmp(name, "norm") == 0) {
        /* MEAN/STD values are separated by ':' too: hand norm the whole rest. */
        const char *colon = strchr(orig, ':');
        char rest[256];
        snprintf(rest, sizeof rest, "%s", colon ? colon + 1 : "");
        return parse_norm(colon ? rest : NULL, orig, t);
    } else {
        const char *why = NULL;
        stk_pixel_op op;
        /* nargs may be 8 for "more than 7": every op takes fewer. */
        int found = stk_pixel_op_parse(name, args + 1, nargs, &op, &why);
        if (found < 0) return bad(orig, why);
        if (found == 0) return unknown(name, orig);
        if (t->n_ops == STK_TRANSFORM_MAX_OPS) return bad(orig, "too many pixel ops (at most 16)");
        t->ops[t->n_ops++] = op;
    }
    return STK_OK;
}

stk_status stk_transform_parse(const char *spec, stk_transform *t)
{
    memset(t, 0, sizeof *t);
    t->scale[0] = 0.08, t->scale[1] = 1.0;
    t->ratio[0] = 3.0 / 4.0, t->ratio[1] = 4.0 / 3.0;
    if (!spec || !*spec) return stk_error(STK_ERR_INVALID_ARG, "transform: empty spec");
    char buf[1024];
    if (strlen(spec) >= sizeof buf)
        return stk_error(STK_ERR_INVALID_ARG, "transform: a spec of %zu characters (at most %zu)",
                         strlen(spec), sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    /* Tokens between commas; an empty one ("", ",", "flip,,crop:8") is a
     * mistake, not nothing. */
    for (char *tok = buf;;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = '\0';
        char orig[256], work[256];
        if (!*tok) return stk_error(STK_ERR_INVALID_ARG, "transform \"%s\": an empty token", spec);
        if (strlen(tok) >= sizeof orig)
            return stk_error(STK_ERR_INVALID_ARG,
                             "transform \"%.40s...\": a token of %zu characters", tok, strlen(tok));
        memcpy(orig, tok, strlen(tok) + 1); /* fits: checked above */
        memcpy(work, tok, strlen(tok) + 1);
        stk_status st = parse_token(work, orig, t);
        if (st != STK_OK) return st;
        if (!comma) break;
        tok = comma + 1;
    }
    /* Combinations that make sense, in torchvision's order. */
    int geometry = (t->rrc > 0) + (t->resize || t->center) + (t->crop > 0 || t->pad > 0);
    if (t->none &&
        (geometry || t->flip > 0 || t->norm || t->n_ops || stk_transform_has_batch_ops(t)))
        return stk_error(STK_ERR_INVALID_ARG, "transform \"%s\": none takes no other transforms",
                         spec);
    if (geometry > 1)
        return stk_error(STK_ERR_INVALID_ARG,
                         "transform \"%s\": use one of rrc, resize/center, or pad/crop", spec);
    if (t->pad && !t->crop)
        return stk_error(STK_ERR_INVALID_ARG, "transform \"%s\": pad goes with crop:SIZE", spec);
    int side;
    for (int i = 0; i < t->n_ops && stk_transform_fixed_size(t, &side); i++)
        if ((t->ops[i].kind == STK_OP_BLUR || t->ops[i].kind == STK_OP_GAUSSIAN_BLUR) &&
            (int)t->ops[i].arg[0] / 2 >= side)
            return stk_error(STK_ERR_INVALID_ARG,
                             "transform \"%s\": a blur kernel of %d on %dx%d images (at most %d)",
                             spec, (int)t->ops[i].arg[0], side, side, 2 * side - 1);
    if (t->resize && t->center > t->resize)
        return stk_error(STK_ERR_INVALID_ARG,
                         "transform \"%s\": center:%d is larger than resize:%d", spec, t->center,
                         t->resize);
    return STK_OK;
}

bool stk_transform_fixed_size(const stk_transform *t, int *size)
{
    int s = t->rrc ? t->rrc : t->center ? t->center : t->crop;
    if (size) *size = s;
    return s > 0;
}

void stk_transform_format(const stk_transform *t, char *buf, size_t size)
{
    size_t n = 0;
#define ADD(...) n += (size_t)snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__)
    buf[0] = '\0';
    if (t->none) ADD("none");
    if (t->rrc) {
        ADD("rrc:%d", t->rrc);
        if (t->scale[0] != 0.08 || t->scale[1] != 1.0) ADD(":%g:%g", t->scale[0], t->scale[1]);
    }
    if (t->resize) ADD("%sresize:%d", n ? "," : "", t->resize);
    if (t->center) ADD("%scenter:%d", n ? "," : "", t->center);
    if (t->pad) ADD("%spad:%d", n ? "," : "", t->pad);
    if (t->crop) ADD("%scrop:%d", n ? "," : "", t->crop);
    if (t->flip > 0) ADD(t->flip == 0.5 ? "%sflip" : "%sflip:%g", n ? "," : "", t->flip);
    for (int i = 0; i < t->n_ops; i++) {
        if (n < size) stk_pixel_op_format(&t->ops[i], buf, size);
        n = strlen(buf);
    }
    if (t->erase > 0) ADD(t->erase == 0.5 ? "%serase" : "%serase:%.9g", n ? "," : "", t->erase);
    if (t->mixup > 0) ADD("%smixup:%.9g", n ? "," : "", t->mixup);
    if (t->cutmix > 0) ADD("%scutmix:%.9g", n ? "," : "", t->cutmix);
    if (t->norm == STK_NORM_DATASET) ADD("%snorm", n ? "," : "");
    if (t->norm == STK_NORM_IMAGENET) ADD("%snorm:imagenet", n ? "," : "");
    if (t->norm == STK_NORM_EXPLICIT) {
        ADD("%snorm:", n ? "," : "");
        for (int i = 0; i < t->norm_values; i++) ADD("%s%g", i ? ":" : "", t->mean[i]);
        ADD("/");
        for (int i = 0; i < t->norm_values; i++) ADD("%s%g", i ? ":" : "", t->std[i]);
    }
    if (!buf[0]) ADD("none"); /* e.g. "flip:0": the image as it is */
#undef ADD
}

stk_status stk_transform_check_fits(const stk_transform *t, uint32_t min_width, uint32_t min_height)
{
    /* The geometry that runs (stk_plan_sample's order): rrc, resize, center
     * and none always fit; crop needs the padded image to hold it. */
    if (t->rrc || t->resize || t->center || !t->crop) return STK_OK;
    uint64_t pw = (uint64_t)min_width + 2u * (uint64_t)t->pad;
    uint64_t ph = (uint64_t)min_height + 2u * (uint64_t)t->pad;
    if ((uint64_t)t->crop <= pw && (uint64_t)t->crop <= ph) return STK_OK;
    return stk_error(STK_ERR_INVALID_ARG,
                     "crop:%d is larger than the smallest images (%ux%u, %llux%llu with pad:%d); "
                     "use crop:%llu or less, or rrc:%d / resize:%d,center:%d",
                     t->crop, min_width, min_height, (unsigned long long)pw, (unsigned long long)ph,
                     t->pad, (unsigned long long)(pw < ph ? pw : ph), t->crop, t->crop, t->crop);
}

bool stk_transform_has_batch_ops(const stk_transform *t)
{
    return t->erase > 0 || t->mixup > 0 || t->cutmix > 0;
}

bool stk_transform_is_random(const stk_transform *t)
{
    for (int i = 0; i < t->n_ops; i++)
        if (t->ops[i].kind >= STK_OP_DETERMINISTIC_END) return true;
    return false;
}

void stk_transform_norm_values(const stk_transform *t, const float dataset_mean[3],
                               const float dataset_std[3], float mean[3], float std[3])
{
    static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
    static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        mean[c] = 0, std[c] = 1;
        if (t->norm == STK_NORM_IMAGENET) mean[c] = imagenet_mean[c], std[c] = imagenet_std[c];
        if (t->norm == STK_NORM_EXPLICIT) mean[c] = t->mean[c], std[c] = t->std[c];
        if (t->norm == STK_NORM_DATASET) mean[c] = dataset_mean[c], std[c] = dataset_std[c];
    }
}
