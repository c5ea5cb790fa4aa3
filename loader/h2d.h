/* The host-to-device stage: the loader's pinned batches, double-buffered on
 * the device, so that copying batch k+1 overlaps the compute on batch k.
 *
 *     stk_h2d *h;
 *     STK_TRY(stk_h2d_open(loader, stk_copy_engine_cpu(), &h));
 *     stk_h2d_drain(h);                               // before start_epoch / restore
 *     stk_loader_start_epoch(loader, epoch);
 *     stk_device_batch *b;
 *     while ((st = stk_h2d_next(h, &b)) == STK_OK) {
 *         train_step(b->data, b->labels, b->count);   // device memory
 *         stk_h2d_release(h, b);                      // the step is done with it
 *     }
 *     stk_h2d_close(h);                               // before stk_loader_close
 *
 * With a copying device: two device buffers. next() starts the copy of the
 * following batch into the buffer the consumer released, then waits for the
 * copy of the batch it returns; only then does that batch's pinned buffer go
 * back to the loader's ring (a buffer is never reused while a copy reads
 * it). The consumer holds at most one batch at a time: release it before
 * the next call. On an in-place device (the CPU) no copy is made: next()
 * hands out the loader's batch and release() returns it to the ring when
 * the step ends.
 *
 * Threading: one consumer thread, the loader's.
 */
#pragma once

#include "device/copy_engine.h"
#include "loader/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_device_batch {
    void *data;                 /* device memory: count samples of sample_bytes */
    int32_t *labels;            /* device memory: count labels */
    const int32_t *host_labels; /* the same labels on the host (valid until release) */
    size_t sample_bytes;
    int count, width, height, channels;
    stk_pixel_format format;
    uint64_t number, epoch;
    uint64_t trace_id; /* the loader batch's (trace.h flows) */
    stk_device device; /* where data and labels live */
} stk_device_batch;

typedef struct stk_h2d stk_h2d;

/* Errors: STK_ERR_NOMEM (device buffers, with the sizes). */
stk_status stk_h2d_open(stk_loader *l, const stk_copy_engine *ce, stk_h2d **out);
/* Finish the copies in flight and give their host batches back to the ring,
 * forgetting the look-ahead: call before stk_loader_start_epoch or
 * stk_loader_restore (which recycle the ring). A held batch stays held. */
stk_status stk_h2d_drain(stk_h2d *h);
/* The next batch on the device; STK_END at the end of the epoch; the
 * loader's error otherwise. Errors: STK_ERR_INVALID_ARG (a batch is still held). */
stk_status stk_h2d_next(stk_h2d *h, stk_device_batch **out);
/* The consumer is done with b (its step has finished using the data). */
void stk_h2d_release(stk_h2d *h, stk_device_batch *b);
/* Number of copies started (0 on an in-place device). */
uint64_t stk_h2d_copies(const stk_h2d *h);
void stk_h2d_close(stk_h2d *h);

#ifdef __cplusplus
}
#endif
