/* Element conversions between Stoke's dtypes (kernels/dtype.h), written
 * once for the CPU loops and the CUDA kernels: bf16 rounds to nearest even
 * and keeps NaN; u8 saturates; i32 truncates toward zero. */
#pragma once

#include "common/half.h"
#include "common/host_device.h"
#include "kernels/dtype.h"

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline STK_HD uint16_t stk_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN */
    x += 0x7FFFu + ((x >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

static inline STK_HD float stk_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline STK_HD float stk_load_f32(stk_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case STK_F32: return ((const float *)p)[i];
    case STK_F16: return stk_f16_to_f32(((const uint16_t *)p)[i]);
    case STK_BF16: return stk_bf16_to_f32(((const uint16_t *)p)[i]);
    case STK_I32: return (float)((const int32_t *)p)[i];
    case STK_U8: return (float)((const uint8_t *)p)[i];
    }
    return 0.f;
}

static inline STK_HD void stk_store_f64(stk_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case STK_F32: ((float *)p)[i] = (float)v; break;
    case STK_F16: ((uint16_t *)p)[i] = stk_f32_to_f16((float)v); break;
    case STK_BF16: ((uint16_t *)p)[i] = stk_f32_to_bf16((float)v); break;
    case STK_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case STK_U8: ((uint8_t *)p)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); break;
    }
}

#ifdef __cplusplus
}
#endif
