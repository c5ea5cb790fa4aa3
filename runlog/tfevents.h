/* TensorBoard event files: what `tensorboard --logdir RUNDIR` reads.
 *
 *     stk_tfevents *w;
 *     STK_TRY(stk_tfevents_open("run-cnn", &w));       //
 * run-cnn/events.out.tfevents.T.HOST.PID.stoke STK_TRY(stk_tfevents_scalar(w, "train/loss", step,
 * loss)); STK_TRY(stk_tfevents_image(w, "train/batch", 0, pixels, width, height, 3));
 *     STK_TRY(stk_tfevents_text(w, "config", 0, "| flag | value |\n| --- | --- |\n..."));
 *     STK_TRY(stk_tfevents_flush(w));                   // at the end of each epoch
 *     stk_tfevents_close(w);
 *
 * The file is a sequence of TFRecords: u64 length, masked CRC-32C of the
 * length, the serialized Event, masked CRC-32C of it (mask: rotate right by
 * 15, add 0xa282ead8); the first Event holds file_version "brain.Event:2".
 * Event{wall_time=1, step=2, file_version=3, summary=5}, Summary{value=1},
 * Summary.Value{tag=1, simple_value=2, image=4, tensor=8, metadata=9},
 * Summary.Image{height=1, width=2, colorspace=3, encoded_image_string=4 (PNG)};
 * text is a DT_STRING TensorProto{dtype=1, tensor_shape=2, string_val=8}
 * under the "text" plugin (SummaryMetadata{plugin_data=1{plugin_name=1}}).
 * Records are appended and flushed by the caller; a run cut off mid-record
 * leaves a truncated last record, which TensorBoard skips. Each open makes a
 * new file (TensorBoard merges every file of a directory: a resumed run adds
 * one). One thread at a time per writer.
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_tfevents stk_tfevents;

/* A new event file in directory `dir` (which must exist). Errors: IO. */
stk_status stk_tfevents_open(const char *dir, stk_tfevents **out);
/* The file's path (valid until close). */
const char *stk_tfevents_path(const stk_tfevents *w);
/* Errors of the writers below: IO (the disk), NOMEM. */
stk_status stk_tfevents_scalar(stk_tfevents *w, const char *tag, int64_t step, float value);
/* pixels: height rows of width x channels (1 or 3) bytes, written as PNG. */
stk_status stk_tfevents_image(stk_tfevents *w, const char *tag, int64_t step, const uint8_t *pixels,
                              int width, int height, int channels);
/* Markdown text (TensorBoard's text plugin renders tables). */
stk_status stk_tfevents_text(stk_tfevents *w, const char *tag, int64_t step, const char *text);
/* A summary for a TensorBoard plugin: its name and serialized content in the
 * value's metadata (SummaryMetadata.plugin_data{plugin_name=1, content=2}),
 * with an empty float tensor (runlog/tb_hparams.h's summaries). */
stk_status stk_tfevents_plugin(stk_tfevents *w, const char *tag, int64_t step, const char *plugin,
                               const void *content, size_t len);
stk_status stk_tfevents_flush(stk_tfevents *w);
/* Flushes and closes; NULL is a no-op. */
void stk_tfevents_close(stk_tfevents *w);

/* The record framing's CRC mask (exposed for tests). */
uint32_t stk_tfevents_masked_crc(const void *data, size_t len);

#ifdef __cplusplus
}
#endif
