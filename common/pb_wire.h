/* A protobuf wire-format encoder for the few messages Stoke writes
 * (TensorBoard's Event and Summary, ONNX's ModelProto): varints, 64/32-bit fixed fields,
 * length-delimited bytes, and nested messages.
 *
 *     stk_pb b;
 *     stk_pb_init(&b);
 *     stk_pb_double(&b, 1, wall_time);          // Event.wall_time
 *     stk_pb_int(&b, 2, step);                  // Event.step
 *     size_t summary = stk_pb_begin(&b, 5);     // Event.summary {
 *     size_t value = stk_pb_begin(&b, 1);       //   Summary.value {
 *     stk_pb_string(&b, 1, "loss");             //     tag
 *     stk_pb_float(&b, 2, 0.25f);               //     simple_value
 *     stk_pb_end(&b, value);                    //   }
 *     stk_pb_end(&b, summary);                  // }
 *     if (stk_pb_failed(&b)) ...;               // out of memory somewhere above
 *     fwrite(b.data, 1, b.len, f);
 *     stk_pb_deinit(&b);
 *
 * Fields are written in the order called (any order is valid protobuf).
 * An allocation failure makes the buffer sticky-failed: later calls do
 * nothing and stk_pb_failed says so, so callers check once at the end.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_pb {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} stk_pb;

void stk_pb_init(stk_pb *b);
void stk_pb_deinit(stk_pb *b);
/* Empty the buffer, keeping its memory (and clearing a failure). */
void stk_pb_reset(stk_pb *b);
bool stk_pb_failed(const stk_pb *b);

/* Wire type 0: int32/int64/uint64/bool/enum (negative values as 10 bytes, as protobuf). */
void stk_pb_int(stk_pb *b, int field, int64_t v);
/* Wire type 1: double. */
void stk_pb_double(stk_pb *b, int field, double v);
/* Wire type 5: float. */
void stk_pb_float(stk_pb *b, int field, float v);
/* Wire type 2: bytes / string. */
void stk_pb_bytes(stk_pb *b, int field, const void *data, size_t len);
void stk_pb_string(stk_pb *b, int field, const char *s);
/* Fields encoded in another buffer, appended as they are (a message's
 * repeated fields gathered apart, then written in place). */
void stk_pb_append(stk_pb *b, const stk_pb *fields);
/* A nested message: stk_pb_begin returns a mark for the matching stk_pb_end,
 * which writes the length in front of what was written in between. */
size_t stk_pb_begin(stk_pb *b, int field);
void stk_pb_end(stk_pb *b, size_t mark);

/* The raw varint encoding of v into out (at most 10 bytes); its length. */
size_t stk_pb_varint_encode(uint64_t v, uint8_t out[10]);

#ifdef __cplusplus
}
#endif
