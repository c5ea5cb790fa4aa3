/* Batches on a GPU for the Python package (stoke.Loader(device="cuda")): a
 * ring of device buffers, each filled from one of the loader's pinned
 * batches by the copy engine (device/copy_engine.h) and held by its Python
 * views until the last one is gone.
 *
 *     stoke_device_ring_fill(r, host_batch, &slot);  // copy, wait: complete on return
 *     stk_loader_release(loader, host_batch);        // the pinned buffer may be refilled
 *     ... views of stoke_device_ring_images(r, slot) on the GPU ...
 *     stoke_device_ring_release(r, slot, stream);    // the last view is gone
 *
 * The copy of batch k+1 runs on the copy stream while the consumer's kernels
 * of step k are still queued on its own stream; a released buffer is not
 * overwritten before the work its consumer queued on `stream` (DLPack's
 * stream argument) has run (copy engine release_after). Holding every
 * buffer makes fill fail, never wait: the ring never grows.
 *
 * Threading: fill from one thread (the consumer's, without the GIL);
 * release from any thread. */
#pragma once

#include "common/status.h"
#include "device/copy_engine.h"
#include "loader/loader.h"

#include <stdint.h>

typedef struct stoke_device_ring stoke_device_ring;

stk_status stoke_device_ring_create(const stk_copy_engine *ce, int slots, stoke_device_ring **out);
/* Copy host batch b (pixels and labels) into a free slot and wait for the
 * copy. Errors: STK_ERR_INVALID_ARG (every slot is held: the message says
 * so), STK_ERR_NOMEM (device memory), the copy's. */
stk_status stoke_device_ring_fill(stoke_device_ring *r, const stk_batch *b, int *slot);
void *stoke_device_ring_images(const stoke_device_ring *r, int slot);
int64_t *stoke_device_ring_labels(const stoke_device_ring *r, int slot);
/* The consumer is done with the slot once the work queued on `stream` (a
 * CUDA stream handle; 1: the legacy default stream) has run. */
void stoke_device_ring_release(stoke_device_ring *r, int slot, uintptr_t stream);
/* Every slot must have been released. */
void stoke_device_ring_destroy(stoke_device_ring *r);
