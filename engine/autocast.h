/* Autocast: the op-level half of mixed precision (--amp).
 *
 *     stk_autocast_begin();          // matmuls and convolutions in f16 / bf16
 *     forward -> loss; backward;     // backward ops keep the forward's precision
 *     stk_autocast_end();            // the optimizer step is f32
 *
 * Inside begin/end, matmul/linear and conv2d (forward and backward) run in
 * low precision with f32 accumulation: on the GPU their operands are
 * converted to f16 (tensor cores); on the CPU they are rounded to bf16 by
 * oneDNN's bf16 kernels (stk_cpu_bf16_isa: AVX512_BF16 or AMX; elsewhere the
 * ops fail with STK_ERR_UNSUPPORTED rather than run emulated or in f32).
 * Their results, and every tensor the engine keeps (weights, activations,
 * gradients, optimizer state), stay f32: the master weights are f32; batch
 * norm, softmax, losses and reductions are f32 (PyTorch's CPU autocast
 * lists). The dynamic loss scaling that makes f16 gradients usable is the
 * trainer's (train/loss_scaler.h); bf16 needs none (f32's exponent range).
 *
 * Threading: the autocast depth is per thread; begin/end nest.
 */
#pragma once

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

void stk_autocast_begin(void);
void stk_autocast_end(void);
/* Inside begin/end on this thread. */
bool stk_autocast_active(void);

#ifdef __cplusplus
}
#endif
