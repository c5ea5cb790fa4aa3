#include "common/pb_wire.h"

#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* Room for a nested message's length written in front of it by stk_pb_end
 * (a varint of up to 5 bytes covers 4 GiB; the body is moved up to meet it). */
#define LEN_ROOM 5

void stk_pb_init(stk_pb *b) { memset(b, 0, sizeof *b); }

void stk_pb_deinit(stk_pb *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void stk_pb_reset(stk_pb *b)
{
    b->len = 0;
    b->failed = false;
}

bool stk_pb_failed(const stk_pb *b) { return b->failed; }

static bool reserve(stk_pb *b, size_t more)
{
    if (b->failed) return false;
    if (b->len + more <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

static void put(stk_pb *b, const void *p, size_t n)
{
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

size_t stk_pb_varint_encode(uint64_t v, uint8_t out[10])
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static void varint(stk_pb *b, uint64_t v)
{
    uint8_t tmp[10];
    put(b, tmp, stk_pb_varint_encode(v, tmp));
}

static void tag(stk_pb *b, int field, int wire)
{
    varint(b, (uint64_t)field << 3 | (unsigned)wire);
}

/* Fixed-width fields are little-endian on the wire. */
static void fixed(stk_pb *b, uint64_t v, int bytes)
{
    uint8_t tmp[8];
    for (int i = 0; i < bytes; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    put(b, tmp, (size_t)bytes);
}

void stk_pb_int(stk_pb *b, int field, int64_t v)
{
    tag(b, field, WIRE_VARINT);
    varint(b, (uint64_t)v);
}

void stk_pb_double(stk_pb *b, int field, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    tag(b, field, WIRE_I64);
    fixed(b, u, 8);
}

void stk_pb_float(stk_pb *b, int field, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    tag(b, field, WIRE_I32);
    fixed(b, u, 4);
}

void stk_pb_bytes(stk_pb *b, int field, const void *data, size_t len)
{
    tag(b, field, WIRE_LEN);
    varint(b, len);
    put(b, data, len);
}

void stk_pb_string(stk_pb *b, int field, const char *s) { stk_pb_bytes(b, field, s, strlen(s)); }

void stk_pb_append(stk_pb *b, const stk_pb *fields)
{
    if (fields->failed) b->failed = true;
    put(b, fields->data, fields->len);
}

size_t stk_pb_begin(stk_pb *b, int field)
{
    tag(b, field, WIRE_LEN);
    if (reserve(b, LEN_ROOM)) b->len += LEN_ROOM;
    return b->len; /* where the body starts */
}

void stk_pb_end(stk_pb *b, size_t mark)
{
    if (b->failed) return;
    size_t body = b->len - mark;
    uint8_t tmp[10];
    size_t n = stk_pb_varint_encode(body, tmp);
    uint8_t *start = b->data + mark - LEN_ROOM;
    memcpy(start, tmp, n);
    memmove(start + n, b->data + mark, body);
    b->len -= LEN_ROOM - n;
}
