#include "augment/geometry.h"

#include <math.h>

/* Augmentation draws from odd streams (2 * epoch + 1); even streams are left
 * for the sampler's permutations. A sample owns 2^16 counter blocks. */
void stk_rng_for_sample(stk_rng *r, uint64_t seed, uint64_t epoch, uint64_t index)
{
    stk_rng_init(r, seed, epoch * 2 + 1, index << 16);
}

void stk_rng_for_sample_ops(stk_rng *r, uint64_t seed, uint64_t epoch, uint64_t index)
{
    stk_rng_init(r, seed, epoch * 2 + 1, (index << 16) + 0x8000);
}

static void whole_bounds(stk_sample_plan *p, uint32_t width, uint32_t height)
{
    p->bx0 = 0, p->by0 = 0, p->bx1 = (int)width, p->by1 = (int)height;
}

static void random_resized_crop(const stk_transform *t, uint32_t width, uint32_t height, stk_rng *r,
                                stk_sample_plan *p)
{
    double area = (double)width * height;
    double log_lo = log(t->ratio[0]), log_hi = log(t->ratio[1]);
    int w = 0, h = 0, x = 0, y = 0;
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double target = area * (t->scale[0] + (t->scale[1] - t->scale[0]) * stk_rng_uniform(r));
        double aspect = exp(log_lo + (log_hi - log_lo) * stk_rng_uniform(r));
        w = (int)lround(sqrt(target * aspect));
        h = (int)lround(sqrt(target / aspect));
        if (w > 0 && h > 0 && (uint32_t)w <= width && (uint32_t)h <= height) {
            y = (int)stk_rng_below(r, height - (uint32_t)h + 1);
            x = (int)stk_rng_below(r, width - (uint32_t)w + 1);
            found = true;
        }
    }
    if (!found) { /* centre crop with the aspect clamped into range */
        double in_ratio = (double)width / height;
        if (in_ratio < t->ratio[0]) {
            w = (int)width;
            h = (int)lround(w / t->ratio[0]);
        } else if (in_ratio > t->ratio[1]) {
            h = (int)height;
            w = (int)lround(h * t->ratio[1]);
        } else {
            w = (int)width, h = (int)height;
        }
        if (w < 1) w = 1;
        if (h < 1) h = 1;
        if ((uint32_t)w > width) w = (int)width;
        if ((uint32_t)h > height) h = (int)height;
        y = ((int)height - h) / 2;
        x = ((int)width - w) / 2;
    }
    p->x0 = x, p->y0 = y, p->w = w, p->h = h;
    p->bx0 = x, p->by0 = y, p->bx1 = x + w, p->by1 = y + h; /* crop first, then resize */
    p->out_w = p->out_h = t->rrc;
    p->resize = true;
}

/* torchvision's Resize(size) output for the shorter side = size. */
static void resized_size(uint32_t width, uint32_t height, int size, int *ow, int *oh)
{
    if (width <= height) {
        *ow = size;
        *oh = (int)((double)size * height / width);
    } else {
        *oh = size;
        *ow = (int)((double)size * width / height);
    }
    if (*ow < 1) *ow = 1;
    if (*oh < 1) *oh = 1;
}

stk_status stk_plan_sample(const stk_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                           uint64_t epoch, uint64_t index, stk_sample_plan *p)
{
    stk_rng r;
    stk_rng_for_sample(&r, seed, epoch, index);
    *p = (stk_sample_plan){0};
    /* 65535 is JPEG's largest side and the dataset format's limit; it keeps
     * every int below (padded sizes, offsets, products with the output size)
     * far from overflow. */
    if (width == 0 || height == 0 || width > 65535 || height > 65535)
        return stk_error(STK_ERR_INVALID_ARG, "image of %ux%u pixels (sides are 1..65535)", width,
                         height);
    if (t->rrc) {
        random_resized_crop(t, width, height, &r, p);
    } else if (t->resize) {
        int ow, oh;
        resized_size(width, height, t->resize, &ow, &oh);
        int cw = t->center ? t->center : ow, ch = t->center ? t->center : oh;
        /* Python's round() is half-to-even, like rint() in the default mode. */
        int left = t->center ? (int)rint((ow - cw) / 2.0) : 0;
        int top = t->center ? (int)rint((oh - ch) / 2.0) : 0;
        double sx = (double)width / ow, sy = (double)height / oh;
        p->x0 = left * sx, p->w = cw * sx;
        p->y0 = top * sy, p->h = ch * sy;
        whole_bounds(p, width, height);
        p->out_w = cw, p->out_h = ch;
        p->resize = true;
    } else if (t->center) {
        int m = t->center;
        p->x0 = (int)rint(((int)width - m) / 2.0);
        p->y0 = (int)rint(((int)height - m) / 2.0);
        p->w = p->h = m;
        p->out_w = p->out_h = m;
        whole_bounds(p, width, height);
    } else if (t->crop) {
        int c = t->crop, pw = (int)width + 2 * t->pad, ph = (int)height + 2 * t->pad;
        if (c > pw || c > ph)
            return stk_error(STK_ERR_INVALID_ARG, "crop:%d is larger than the %dx%d padded image",
                             c, pw, ph);
        int top = (int)stk_rng_below(&r, (uint32_t)(ph - c + 1));
        int left = (int)stk_rng_below(&r, (uint32_t)(pw - c + 1));
        p->x0 = left - t->pad, p->y0 = top - t->pad;
        p->w = p->h = c;
        p->out_w = p->out_h = c;
        whole_bounds(p, width, height);
    } else { /* none, or flip/norm alone: the image as it is */
        p->w = width, p->h = height;
        p->out_w = (int)width, p->out_h = (int)height;
        whole_bounds(p, width, height);
    }
    p->flip = t->flip > 0 && stk_rng_uniform(&r) < t->flip;
    return STK_OK;
}
