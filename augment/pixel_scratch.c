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

/* Grow *buf to n elements of elem bytes (kept when large enough). */
static stk_status grow(void **buf, size_t *cap, size_t n, size_t elem, const char *what)
{
    if (n <= *cap) return STK_OK;
    void *p = realloc(*buf, n * elem);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory (%zu %s for a pixel op)", n, what);
    *buf = p, *cap = n;
    return STK_OK;
}

stk_status stk_pixel_scratch_copy(stk_pixel_scratch *s, size_t bytes)
{
    return grow((void **)&s->copy, &s->copy_cap, bytes, 1, "bytes");
}

stk_status stk_pixel_scratch_plane(stk_pixel_scratch *s, size_t floats)
{
    return grow((void **)&s->plane, &s->plane_cap, floats, sizeof(float), "floats");
}

stk_status stk_pixel_scratch_index(stk_pixel_scratch *s, size_t offsets)
{
    return grow((void **)&s->index, &s->index_cap, offsets, sizeof(int32_t), "offsets");
}
