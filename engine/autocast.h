/* Autocast: the op-level half of mixed precision (--amp).
 *
 *     stk_autocast_begin();          // matmuls and convolutions in f16
 *     forward -> loss; backward;     // backward ops keep the forward's precision
 *     stk_autocast_end();            // the optimizer step is f32
 *
 * Inside begin/end, matmul/linear and conv2d on a backend with f16 kernels
 * (CUDA) convert their operands to f16 and compute with f32 accumulation
 * (tensor cores); their results, and every tensor the engine keeps (weights,
 * activations, gradients, optimizer state), stay f32: the master weights are
 * f32. Other ops and the CPU backend are unaffected. The dynamic loss scaling
 * that makes f16 gradients usable is the trainer's (train/loss_scaler.h).
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
