/* IEEE 754 half-precision conversion, plain math shared by CPU loops and
 * CUDA kernels: round to nearest even, overflow to infinity,
 * subnormals kept, NaN stays NaN. */
#pragma once

#include "common/host_device.h"

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline STK_HD uint16_t stk_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0));
    if (abs >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504: inf */
    if (abs < 0x38800000u) {                                   /* half subnormal or zero */
        if (abs < 0x33000000u) return (uint16_t)sign;          /* below half the smallest */
        uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
        int shift = 126 - (int)(abs >> 23); /* 14..24 */
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((abs - 0x38000000u) >> 13); /* rebias exponent 127 -> 15 */
    uint32_t rem = abs & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static inline STK_HD float stk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, x;
    if (exp == 0x1F)
        x = sign | 0x7F800000u | (mant << 13);
    else if (exp)
        x = sign | ((exp + 112) << 23) | (mant << 13);
    else if (!mant)
        x = sign;
    else { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while (!(mant & 0x400u));
        x = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3FFu) << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

#ifdef __cplusplus
}
#endif
