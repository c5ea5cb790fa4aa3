/* Element types, shared by the kernels and the engine's tensors (the
 * engine builds on kernels/, so the type lives here, once). */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_dtype {
    STK_F32 = 0,
    STK_F16 = 1,
    STK_BF16 = 2,
    STK_I32 = 3,
    STK_U8 = 4,
} stk_dtype;

/* Bytes per element (0 for an unknown value). */
static inline size_t stk_dtype_size(stk_dtype dt)
{
    static const size_t size[] = {4, 2, 2, 4, 1};
    return (unsigned)dt < 5 ? size[dt] : 0;
}

#ifdef __cplusplus
}
#endif
