#include "common/pb_read.h"

#include <string.h>

void stk_pb_reader_init(stk_pb_reader *r, const void *data, size_t len)
{
    r->start = r->p = data;
    r->end = r->p + len;
    r->error = NULL;
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return false;
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false; /* more than 10 bytes */
}

static int bad(stk_pb_reader *r, const char *why)
{
    r->error = why;
    return -1;
}

int stk_pb_next(stk_pb_reader *r, stk_pb_field *f)
{
    if (r->error) return -1;
    if (r->p >= r->end) return 0;
    memset(f, 0, sizeof *f);
    f->offset = (size_t)(r->p - r->start);
    uint64_t tag;
    if (!varint(&r->p, r->end, &tag)) return bad(r, "a field's tag is cut off");
    f->wire = (int)(tag & 7);
    uint64_t num = tag >> 3;
    if (num == 0 || num > (1u << 29) - 1) return bad(r, "a field number is 0 or too large");
    f->field = (int)num;
    switch (f->wire) {
    case STK_PB_VARINT:
        if (!varint(&r->p, r->end, &f->v)) return bad(r, "a varint is cut off");
        return 1;
    case STK_PB_I64:
    case STK_PB_I32: {
        size_t n = f->wire == STK_PB_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n) return bad(r, "a fixed-size value is cut off");
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        f->v = v;
        return 1;
    }
    case STK_PB_LEN: {
        uint64_t len;
        if (!varint(&r->p, r->end, &len)) return bad(r, "a length is cut off");
        if (len > (uint64_t)(r->end - r->p))
            return bad(r, "a field runs past the end of its message");
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 1;
    }
    default: return bad(r, "a group or an unknown wire type");
    }
}

const char *stk_pb_reader_error(const stk_pb_reader *r, size_t *offset)
{
    if (offset) *offset = (size_t)(r->p - r->start);
    return r->error;
}

static size_t width(int wire) { return wire == STK_PB_I64 ? 8 : wire == STK_PB_I32 ? 4 : 0; }

int64_t stk_pb_packed_count(const stk_pb_field *f, int wire)
{
    if (f->wire != STK_PB_LEN) return f->wire == wire ? 1 : -1;
    size_t w = width(wire);
    if (w) return f->len % w ? -1 : (int64_t)(f->len / w);
    int64_t n = 0;
    const uint8_t *p = f->data, *end = f->data + f->len;
    uint64_t v;
    while (p < end) {
        if (!varint(&p, end, &v)) return -1;
        n++;
    }
    return n;
}

bool stk_pb_repeated(const stk_pb_field *f, int wire, uint64_t *out, size_t max, size_t *n)
{
    *n = 0;
    if (f->wire == wire && wire != STK_PB_LEN) { /* one unpacked value */
        if (max < 1) return false;
        out[(*n)++] = f->v;
        return true;
    }
    if (f->wire != STK_PB_LEN) return false;
    const uint8_t *p = f->data, *end = f->data + f->len;
    size_t w = width(wire);
    while (p < end) {
        if (*n >= max) return false;
        if (w) {
            if ((size_t)(end - p) < w) return false;
            uint64_t v = 0;
            for (size_t i = 0; i < w; i++) v |= (uint64_t)p[i] << (8 * i);
            p += w;
            out[(*n)++] = v;
        } else if (!varint(&p, end, &out[(*n)++])) {
            return false;
        }
    }
    return true;
}

float stk_pb_float_of(uint64_t bits)
{
    uint32_t b = (uint32_t)bits;
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}
