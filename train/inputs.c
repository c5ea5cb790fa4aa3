/* Transforms for training and evaluation (inputs.h). */
#include "train/inputs.h"

#include "augment/transform_spec.h"

#include <math.h>
#include <stdio.h>

void stk_train_default_eval_transform(const stk_meta *m, int size, char *buf, size_t n)
{
    if (m->encoding == STK_ENCODING_JPEG)
        snprintf(buf, n, "resize:%d,center:%d", (int)lround(size * 256.0 / 224.0), size);
    else
        snprintf(buf, n, "center:%d", size);
}

stk_status stk_train_check_transform(const stk_meta *m, const char *flag, const char *spec,
                                     int *size)
{
    stk_transform t;
    stk_status st = stk_transform_parse(spec, &t);
    if (st != STK_OK) return stk_error_prefix(st, "%s", flag);
    if (!stk_transform_fixed_size(&t, size))
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: batches need one image size: add center:N, crop:N or rrc:N", flag,
                         spec);
    if (t.norm != STK_NORM_NONE)
        return stk_error(STK_ERR_INVALID_ARG,
                         "%s %s: drop the norm token: training normalises on the device with the "
                         "dataset's statistics",
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
