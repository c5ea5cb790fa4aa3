#include "runlog/tfevents.h"

#include "common/crc32c.h"
#include "common/text.h"
#include "common/pb_wire.h"
#include "runlog/png.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct stk_tfevents {
    FILE *f;
    char *path;
    stk_pb pb; /* the event being built, reused */
};

/* Event, Summary and Value field numbers (tensorflow/core/util/event.proto,
 * tensorflow/core/framework/summary.proto, tensor.proto). */
enum {
    EVENT_WALL_TIME = 1,
    EVENT_STEP = 2,
    EVENT_FILE_VERSION = 3,
    EVENT_SUMMARY = 5,
    SUMMARY_VALUE = 1,
    VALUE_TAG = 1,
    VALUE_SIMPLE = 2,
    VALUE_IMAGE = 4,
    VALUE_TENSOR = 8,
    VALUE_METADATA = 9,
    IMAGE_HEIGHT = 1,
    IMAGE_WIDTH = 2,
    IMAGE_COLORSPACE = 3,
    IMAGE_ENCODED = 4,
    TENSOR_DTYPE = 1,
    TENSOR_SHAPE = 2,
    TENSOR_STRING_VAL = 8,
    DT_FLOAT = 1,
    DT_STRING = 7,
    SHAPE_DIM = 2,
    METADATA_PLUGIN_DATA = 1,
    PLUGIN_NAME = 1,
    PLUGIN_CONTENT = 2,
};

uint32_t stk_tfevents_masked_crc(const void *data, size_t len)
{
    uint32_t crc = stk_crc32c(0, data, len);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static double wall_time(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Frame the event in w->pb as one record and append it. */
static stk_status write_record(stk_tfevents *w)
{
    if (stk_pb_failed(&w->pb))
        return stk_error(STK_ERR_NOMEM, "%s: no memory for an event", w->path);
    uint8_t head[12], tail[4];
    le(head, w->pb.len, 8);
    le(head + 8, stk_tfevents_masked_crc(head, 8), 4);
    le(tail, stk_tfevents_masked_crc(w->pb.data, w->pb.len), 4);
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(w->pb.data, 1, w->pb.len, w->f) != w->pb.len ||
        fwrite(tail, 1, 4, w->f) != 4)
        return stk_error(STK_ERR_IO, "%s: %s", w->path, strerror(errno));
    return STK_OK;
}

/* Start an event: wall time and step; returns the Summary.Value's marks. */
static void begin_value(stk_tfevents *w, int64_t step, const char *tag, size_t *summary,
                        size_t *value)
{
    stk_pb_reset(&w->pb);
    stk_pb_double(&w->pb, EVENT_WALL_TIME, wall_time());
    stk_pb_int(&w->pb, EVENT_STEP, step);
    *summary = stk_pb_begin(&w->pb, EVENT_SUMMARY);
    *value = stk_pb_begin(&w->pb, SUMMARY_VALUE);
    stk_pb_string(&w->pb, VALUE_TAG, tag);
}

static stk_status end_value(stk_tfevents *w, size_t summary, size_t value)
{
    stk_pb_end(&w->pb, value);
    stk_pb_end(&w->pb, summary);
    return write_record(w);
}

stk_status stk_tfevents_open(const char *dir, stk_tfevents **out)
{
    *out = NULL;
    stk_tfevents *w = calloc(1, sizeof *w);
    if (!w) return stk_error(STK_ERR_NOMEM, "no memory for an event writer");
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    struct timeval tv;
    gettimeofday(&tv, NULL);
    /* the microseconds keep two opens in one second apart */
    w->path = stk_text_printf("%s/events.out.tfevents.%lld.%s.%d.%06ld.stoke", dir,
                              (long long)tv.tv_sec, host, (int)getpid(), (long)tv.tv_usec);
    if (!w->path) {
        free(w);
        return stk_error(STK_ERR_NOMEM, "no memory for an event writer");
    }
    if (!(w->f = fopen(w->path, "wbx"))) {
        stk_status st = stk_error(STK_ERR_IO, "%s: %s", w->path, strerror(errno));
        free(w->path);
        free(w);
        return st;
    }
    stk_pb_init(&w->pb);
    stk_pb_double(&w->pb, EVENT_WALL_TIME, (double)tv.tv_sec + tv.tv_usec * 1e-6);
    stk_pb_string(&w->pb, EVENT_FILE_VERSION, "brain.Event:2");
    stk_status st = write_record(w);
    if (st == STK_OK) st = stk_tfevents_flush(w);
    if (st != STK_OK) {
        stk_tfevents_close(w);
        return st;
    }
    *out = w;
    return STK_OK;
}

const char *stk_tfevents_path(const stk_tfevents *w) { return w->path; }

stk_status stk_tfevents_scalar(stk_tfevents *w, const char *tag, int64_t step, float value)
{
    size_t summary, v;
    begin_value(w, step, tag, &summary, &v);
    stk_pb_float(&w->pb, VALUE_SIMPLE, value);
    return end_value(w, summary, v);
}

stk_status stk_tfevents_image(stk_tfevents *w, const char *tag, int64_t step, const uint8_t *pixels,
                              int width, int height, int channels)
{
    uint8_t *png;
    size_t n;
    STK_TRY(stk_png_encode(pixels, width, height, channels, &png, &n));
    size_t summary, v;
    begin_value(w, step, tag, &summary, &v);
    size_t img = stk_pb_begin(&w->pb, VALUE_IMAGE);
    stk_pb_int(&w->pb, IMAGE_HEIGHT, height);
    stk_pb_int(&w->pb, IMAGE_WIDTH, width);
    stk_pb_int(&w->pb, IMAGE_COLORSPACE, channels); /* 1 grayscale, 3 RGB */
    stk_pb_bytes(&w->pb, IMAGE_ENCODED, png, n);
    stk_pb_end(&w->pb, img);
    free(png);
    return end_value(w, summary, v);
}

stk_status stk_tfevents_text(stk_tfevents *w, const char *tag, int64_t step, const char *text)
{
    size_t summary, v;
    begin_value(w, step, tag, &summary, &v);
    size_t meta = stk_pb_begin(&w->pb, VALUE_METADATA);
    size_t plugin = stk_pb_begin(&w->pb, METADATA_PLUGIN_DATA);
    stk_pb_string(&w->pb, PLUGIN_NAME, "text");
    stk_pb_end(&w->pb, plugin);
    stk_pb_end(&w->pb, meta);
    size_t tensor = stk_pb_begin(&w->pb, VALUE_TENSOR);
    stk_pb_int(&w->pb, TENSOR_DTYPE, DT_STRING);
    stk_pb_end(&w->pb, stk_pb_begin(&w->pb, TENSOR_SHAPE)); /* a scalar: no dimensions */
    stk_pb_string(&w->pb, TENSOR_STRING_VAL, text);
    stk_pb_end(&w->pb, tensor);
    return end_value(w, summary, v);
}

stk_status stk_tfevents_plugin(stk_tfevents *w, const char *tag, int64_t step, const char *plugin,
                               const void *content, size_t len)
{
    size_t summary, v;
    begin_value(w, step, tag, &summary, &v);
    size_t meta = stk_pb_begin(&w->pb, VALUE_METADATA);
    size_t data = stk_pb_begin(&w->pb, METADATA_PLUGIN_DATA);
    stk_pb_string(&w->pb, PLUGIN_NAME, plugin);
    stk_pb_bytes(&w->pb, PLUGIN_CONTENT, content, len);
    stk_pb_end(&w->pb, data);
    stk_pb_end(&w->pb, meta);
    /* an empty float tensor of shape [0] (the hparams plugin's NULL_TENSOR) */
    size_t tensor = stk_pb_begin(&w->pb, VALUE_TENSOR);
    stk_pb_int(&w->pb, TENSOR_DTYPE, DT_FLOAT);
    size_t shape = stk_pb_begin(&w->pb, TENSOR_SHAPE);
    stk_pb_end(&w->pb, stk_pb_begin(&w->pb, SHAPE_DIM)); /* dim { size: 0 } */
    stk_pb_end(&w->pb, shape);
    stk_pb_end(&w->pb, tensor);
    return end_value(w, summary, v);
}

stk_status stk_tfevents_flush(stk_tfevents *w)
{
    if (fflush(w->f) != 0) return stk_error(STK_ERR_IO, "%s: %s", w->path, strerror(errno));
    return STK_OK;
}

void stk_tfevents_close(stk_tfevents *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    stk_pb_deinit(&w->pb);
    free(w->path);
    free(w);
}
