/* Transforms for training and evaluation (inputs.h). */
#include "train/inputs.h"

#include "augment/transform_spec.h"
#include "train/batch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void stk_train_default_eval_transform(const stk_meta *m, int size, char *buf, size_t n)
{
    if (m->encoding == STK_ENCODING_JPEG)
        snprintf(buf, n, "resize:%d,center:%d", (int)lround(size * 256.0 / 224.0), size);
    else
        snprintf(buf, n, "center:%d", size);
}

stk_status stk_train_check_transform(const stk_meta *m, const char *flag, const char *spec,
                                     bool norm_ok, int *size)
{
    stk_transform t;
    stk_status st = stk_transform_parse(spec, &t);
    if (st != STK_OK) return stk_error_prefix(st, "%s", flag);
    if (!stk_transform_fixed_size(&t, size))
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: batches need one image size: add center:N, crop:N or rrc:N", flag,
                         spec);
    if (stk_transform_has_batch_ops(&t) && !norm_ok)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: erase, mixup and cutmix are for training batches; evaluation "
                         "never applies them",
                         flag, spec);
    if (t.norm != STK_NORM_NONE && !norm_ok)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: drop the norm token: evaluation normalises as training did "
                         "(stoke train --norm, or the training transform's norm token)",
                         flag, spec);
    if (m->encoding == STK_ENCODING_RAW_U8) {
        uint32_t side = m->min_width < m->min_height ? m->min_width : m->min_height;
        if ((t.rrc || t.resize) && *size > (int)side)
            return stk_error(STK_ERR_INVALID_ARG,
                             "%s %s makes %dx%d images from %ux%u raw images (a JPEG-sized "
                             "transform?): use pad:4,crop:%u,flip for training, center:%u for "
                             "evaluation",
                             flag, spec, *size, *size, m->min_width, m->min_height, side, side);
    }
    return STK_OK;
}

stk_status stk_train_batch_mix(const char *transform, double mix_prob, int rank,
                               stk_batch_mix_config *c)
{
    stk_transform t;
    stk_status st = stk_transform_parse(transform, &t);
    if (st != STK_OK) return stk_error_prefix(st, "--transform");
    *c = (stk_batch_mix_config){.erase = (float)t.erase,
                                .mixup_alpha = (float)t.mixup,
                                .cutmix_alpha = (float)t.cutmix,
                                .mix_prob = (float)mix_prob,
                                .switch_prob = 0.5f,
                                .rank = rank};
    return stk_batch_mix_check(c);
}

/* --norm's value as a transform token: "dataset" -> norm, "M,S" -> norm:M/S. */
static stk_status parse_norm_flag(const char *value, stk_transform *t)
{
    char spec[256];
    if (!strcmp(value, "dataset"))
        snprintf(spec, sizeof spec, "norm");
    else if (snprintf(spec, sizeof spec, "norm:%s", value) >= (int)sizeof spec)
        return stk_error(STK_ERR_INVALID_ARG, "--norm %.40s...: too long", value);
    char *comma = strchr(spec, ',');
    if (comma) *comma = '/';
    if (strchr(spec, ',') || (strchr(value, '/') && comma) ||
        stk_transform_parse(spec, t) != STK_OK || t->norm == STK_NORM_NONE)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--norm %s: expected dataset, imagenet or MEAN,STD (one value, or one per "
                         "channel separated by ':')",
                         value);
    return STK_OK;
}

/* The values a norm token asks for (the dataset's from m when it says so). */
static void norm_values(const stk_transform *t, const stk_meta *m, const char *path, float mean[3],
                        float std[3])
{
    float dmean[3] = {0}, dstd[3] = {0};
    if (t->norm == STK_NORM_DATASET) stk_input_norm_from_meta(m, path, dmean, dstd);
    stk_transform_norm_values(t, dmean, dstd, mean, std);
}

stk_status stk_train_normalisation(const stk_meta *m, const char *path, const char *norm,
                                   const char *transform, float mean[3], float std[3])
{
    stk_transform tf = {0}, tt = {0};
    if (norm) STK_TRY(parse_norm_flag(norm, &tf));
    if (transform && stk_transform_parse(transform, &tt) != STK_OK) tt.norm = STK_NORM_NONE;
    const stk_transform *chosen = norm ? &tf : tt.norm != STK_NORM_NONE ? &tt : NULL;
    if (!chosen) { /* the default: the dataset's statistics */
        stk_input_norm_from_meta(m, path, mean, std);
        return STK_OK;
    }
    if (chosen->norm == STK_NORM_EXPLICIT && chosen->norm_values == 3 && m->channels == 1)
        return stk_error(STK_ERR_INVALID_ARG, "%s %s: 3 means and stds for a 1-channel dataset",
                         norm ? "--norm" : "--transform", norm ? norm : transform);
    norm_values(chosen, m, path, mean, std);
    if (norm && tt.norm != STK_NORM_NONE) { /* both given: they must agree */
        float m2[3], s2[3];
        norm_values(&tt, m, path, m2, s2);
        if (memcmp(m2, mean, sizeof m2) || memcmp(s2, std, sizeof s2))
            return stk_error(STK_ERR_INVALID_ARG,
                             "--norm %s and the norm token of --transform %s disagree: give one",
                             norm, transform);
    }
    return STK_OK;
}
