/* STK_HD marks plain math as callable from both host code and CUDA kernels
 * (__host__ __device__ under nvcc, nothing elsewhere), so one definition
 * serves the CPU loops, the CUDA kernels and the kernels' host emulation. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define STK_HD __host__ __device__
#else
#define STK_HD
#endif

#ifdef __cplusplus
}
#endif
