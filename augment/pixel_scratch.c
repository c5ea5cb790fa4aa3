/* The pixel ops' scratch buffers (augment/pixel_ops.h). */
#include "augment/pixel_ops_impl.h"

#include <stdlib.h>

void stk_pixel_scratch_deinit(stk_pixel_scratch *s)
{
    free(s->copy);
    free(s->plane);
    free(s->index);
    *s = (stk_pixel_scratch){0};
}

stk_status stk_pixel_scratch_copy(stk_pixel_scratch *s, size_t bytes)
{
    if (bytes <= s->copy_cap) return STK_OK;
    uint8_t *p = realloc(s->copy, bytes);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory (%zu bytes for a pixel op)", bytes);
    s->copy = p, s->copy_cap = bytes;
    return STK_OK;
}

stk_status stk_pixel_scratch_plane(stk_pixel_scratch *s, size_t floats)
{
    if (floats <= s->plane_cap) return STK_OK;
    float *p = realloc(s->plane, floats * sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory (%zu floats for a pixel op)", floats);
    s->plane = p, s->plane_cap = floats;
    return STK_OK;
}

stk_status stk_pixel_scratch_index(stk_pixel_scratch *s, size_t offsets)
{
    if (offsets <= s->index_cap) return STK_OK;
    int32_t *p = realloc(s->index, offsets * sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory (%zu offsets for a pixel op)", offsets);
    s->index = p, s->index_cap = offsets;
    return STK_OK;
}
