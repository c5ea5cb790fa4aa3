/* A protobuf wire-format decoder for the messages Stoke reads (ONNX's
 * ModelProto): a cursor over one message's bytes that yields its fields in
 * order, never reading outside them. The counterpart of pb_wire.h.
 *
 *     stk_pb_reader r;
 *     stk_pb_reader_init(&r, data, len);
 *     stk_pb_field f;
 *     int got;
 *     while ((got = stk_pb_next(&r, &f)) > 0) {
 *         if (f.field == 1 && f.wire == STK_PB_LEN) name = f.data, name_len = f.len;
 *         else if (f.field == 2 && f.wire == STK_PB_VARINT) version = (int64_t)f.v;
 *         // other fields: skipped, as protobuf readers do
 *     }
 *     if (got < 0) ...;  // malformed: stk_pb_reader_error(&r) says how, and where
 *
 * A nested message is a STK_PB_LEN field: stk_pb_reader_init over f.data,
 * f.len reads it. Groups (wire types 3 and 4, deprecated) are malformed
 * here. Pointers point into the caller's bytes, which must outlive them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { STK_PB_VARINT = 0, STK_PB_I64 = 1, STK_PB_LEN = 2, STK_PB_I32 = 5 };

typedef struct stk_pb_reader {
    const uint8_t *start, *p, *end;
    const char *error; /* static text, NULL until a field is malformed */
} stk_pb_reader;

typedef struct stk_pb_field {
    int field, wire;
    uint64_t v;          /* STK_PB_VARINT, STK_PB_I64, STK_PB_I32 (the bits, little-endian) */
    const uint8_t *data; /* STK_PB_LEN: the field's bytes */
    size_t len;
    size_t offset; /* where the field's tag starts, from the message's start */
} stk_pb_field;

void stk_pb_reader_init(stk_pb_reader *r, const void *data, size_t len);
/* The next field: 1 when there is one (in *f), 0 at the message's end, -1
 * when the bytes are malformed (a truncated varint or field, a field number
 * 0 or above 2^29 - 1, a group); the reader then stays at -1. */
int stk_pb_next(stk_pb_reader *r, stk_pb_field *f);
/* Why stk_pb_next returned -1, and at which byte of the message. */
const char *stk_pb_reader_error(const stk_pb_reader *r, size_t *offset);

/* The values of a repeated scalar field, packed (one STK_PB_LEN field) or
 * not (one value): *n values of the field's kind (varints, or fixed 32 or
 * 64 bits, as `wire` says) decoded into out (room for max). Returns false
 * when the bytes are malformed or hold more than max values. */
bool stk_pb_repeated(const stk_pb_field *f, int wire, uint64_t *out, size_t max, size_t *n);
/* How many values a packed field of that kind holds (-1: malformed). */
int64_t stk_pb_packed_count(const stk_pb_field *f, int wire);

/* A float from STK_PB_I32 bits; a signed int64 from a varint. */
float stk_pb_float_of(uint64_t bits);

#ifdef __cplusplus
}
#endif
