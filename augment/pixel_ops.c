/* stk_pixel_ops_apply: each op to its family. */
#include "augment/pixel_ops_impl.h"

stk_status stk_pixel_ops_apply(const stk_pixel_op *ops, int n, uint8_t *img, size_t stride, int w,
                               int h, int c, stk_pixel_scratch *s)
{
    if (c != 1 && c != 3)
        return stk_error(STK_ERR_INVALID_ARG, "pixel op: %d channels (1 or 3)", c);
    for (int i = 0; i < n;) {
        const stk_pixel_op *op = &ops[i];
        stk_status st = STK_OK;
        switch (op->kind) {
        case STK_OP_SHARPNESS:
        case STK_OP_BLUR:
            st = stk_pixel_filter(op, img, stride, w, h, c, s);
            i++;
            break;
        case STK_OP_ROTATE:
        case STK_OP_AFFINE:
        case STK_OP_SHEARX:
        case STK_OP_SHEARY:
        case STK_OP_TRANSLATEX:
        case STK_OP_TRANSLATEY:
            st = stk_pixel_warp(op, img, stride, w, h, c, s);
            i++;
            break;
        default:
            if (op->kind >= STK_OP_DETERMINISTIC_END)
                return stk_error(STK_ERR_INVALID_ARG, "pixel op %s is random: draw it first",
                                 stk_pixel_op_name(op->kind));
            int end = i; /* the colour ops from here (the kinds before sharpness) */
            while (end < n && ops[end].kind < STK_OP_SHARPNESS) end++;
            int ran = 0;
            st = stk_pixel_color(op, end - i, img, stride, w, h, c, s, &ran);
            i += ran;
            break;
        }
        if (st != STK_OK) return st;
    }
    return STK_OK;
}

stk_status stk_pixel_op_apply(const stk_pixel_op *op, uint8_t *img, size_t stride, int w, int h,
                              int c, stk_pixel_scratch *s)
{
    return stk_pixel_ops_apply(op, 1, img, stride, w, h, c, s);
}
