/* The CPU backend's table (the math is in cpu_*.c), and its threads. */
#include "kernels/backend.h"
#include "kernels/cpu_kernels_impl.h"

#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static stk_status cpu_copy_bytes(void *dst, const void *src, size_t bytes)
{
    if (bytes) memcpy(dst, src, bytes);
    return STK_OK;
}

static stk_status cpu_sync(void) { return STK_OK; }

static const stk_backend cpu_backend = {
    .device = STK_DEVICE_CPU,
    .to_host = cpu_copy_bytes,
    .from_host = cpu_copy_bytes,
    .sync = cpu_sync,
    .copy_strided = cpu_copy_strided,
    .convert = cpu_convert,
    .fill = cpu_fill,
    .binary = cpu_binary,
    .unary = cpu_unary,
    .unary_backward = cpu_unary_backward,
    .axpby = cpu_axpby,
    .sum_to = cpu_sum_to,
    .gemm_batched = cpu_gemm_batched,
    .conv2d_forward = cpu_conv2d_forward_dnnl,
    .conv2d_backward_data = cpu_conv2d_backward_data_dnnl,
    .conv2d_backward_weight = cpu_conv2d_backward_weight_dnnl,
    .batch_norm_train = cpu_batch_norm_train,
    .batch_norm_eval = cpu_batch_norm_eval,
    .batch_norm_backward = cpu_batch_norm_backward,
    .batch_norm_eval_backward = cpu_batch_norm_eval_backward,
    .batch_norm_act_train = cpu_batch_norm_act_train,
    .batch_norm_act_backward = cpu_batch_norm_act_backward,
    .max_pool2d_forward = cpu_max_pool2d_forward,
    .max_pool2d_backward = cpu_max_pool2d_backward,
    .avg_pool2d_forward = cpu_avg_pool2d_forward,
    .avg_pool2d_backward = cpu_avg_pool2d_backward,
    .layer_norm_forward = cpu_layer_norm_forward,
    .layer_norm_backward = cpu_layer_norm_backward,
    .softmax_forward = cpu_softmax_forward,
    .softmax_backward = cpu_softmax_backward,
    .cross_entropy_forward = cpu_cross_entropy_forward,
    .cross_entropy_backward = cpu_cross_entropy_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .input_u8_nhwc = cpu_input_u8_nhwc,
    .batch_regions = cpu_batch_regions,
    .gemm_batched_bf16 = cpu_gemm_batched_bf16, /* --amp on the CPU (the f16 entries stay NULL) */
    .conv2d_forward_bf16 = cpu_conv2d_forward_bf16,
    .conv2d_bf16_kept_input_bytes = cpu_conv2d_bf16_kept_input_bytes,
    .conv2d_backward_bf16 = cpu_conv2d_backward_bf16,
    .amp_unscale = cpu_amp_unscale,
    .sum_squares = cpu_sum_squares,
    .clamp = cpu_clamp,
    .sgd_step = cpu_sgd_step,
    .adam_step = cpu_adam_step,
};

const stk_backend *stk_cpu_backend(void) { return &cpu_backend; }

void stk_cpu_set_threads(int n)
{
    if (n < 1) n = omp_get_num_procs();
#if defined(__SANITIZE_THREAD__)
    /* libgomp is not built for ThreadSanitizer, which then reports its barriers
     * as races: TSan builds run the OpenMP loops on one thread (kernels/README.md). */
    n = 1;
#endif
    omp_set_num_threads(n);
}

int stk_cpu_threads(void) { return omp_get_max_threads(); }

const char *stk_cpu_bf16_isa(void)
{
    dnnl_cpu_isa_t e = dnnl_get_effective_cpu_isa();
    /* the ISA values are sets of feature bits: AMX's include AVX512_BF16's */
    if ((e & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx)
        return "avx512_core_amx";
    if ((e & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16)
        return "avx512_core_bf16";
    return NULL;
}

const char *stk_cpu_bf16_missing(void)
{
    if (stk_cpu_bf16_isa()) return NULL;
    return getenv("DNNL_MAX_CPU_ISA") || getenv("ONEDNN_MAX_CPU_ISA")
               ? "runs in bf16 and needs bf16 instructions (AVX512_BF16 or AMX), which this CPU "
                 "(as limited by DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA) lacks"
               : "runs in bf16 and needs bf16 instructions (AVX512_BF16 or AMX), which this CPU "
                 "lacks";
}

void stk_cpu_describe(char *buf, size_t n)
{
    const dnnl_version_t *v = dnnl_version();
    static const char *isa[] = {"generic", "SSE4.1", "AVX", "AVX2", "AVX-512"};
    dnnl_cpu_isa_t e = dnnl_get_effective_cpu_isa();
    int level = e >= dnnl_cpu_isa_avx512_core ? 4
                : e >= dnnl_cpu_isa_avx2      ? 3
                : e >= dnnl_cpu_isa_avx       ? 2
                : e >= dnnl_cpu_isa_sse41     ? 1
                                              : 0;
    const char *bf16 = stk_cpu_bf16_isa();
    snprintf(buf, n, "%d cores, oneDNN %d.%d.%d using %s kernels, bf16 %s%s, OpenMP threads %d",
             omp_get_num_procs(), v->major, v->minor, v->patch, isa[level], bf16 ? "on " : "none",
             bf16 ? bf16 : " (--amp needs AVX512_BF16 or AMX)", omp_get_max_threads());
}
