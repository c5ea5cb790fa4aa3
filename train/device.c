/* Device names and opening (device.h). */
#include "train/device.h"

#include "device/device_query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

stk_status stk_device_spec_parse(const char *text, stk_device_spec *out)
{
    *out = (stk_device_spec){.kind = STK_DEVICE_CPU};
    if (!strcmp(text, "cpu")) return STK_OK;
    if (strncmp(text, "cuda", 4) || (text[4] && text[4] != ':'))
        return stk_error(STK_ERR_INVALID_ARG, "%s: expected cpu, cuda or cuda:N", text);
    out->kind = STK_DEVICE_CUDA;
    if (!text[4]) return STK_OK;
    char *end;
    errno = 0;
    long n = strtol(text + 5, &end, 10);
    if (!text[5] || *end || errno || n < 0 || n >= STK_MAX_GPUS)
        return stk_error(STK_ERR_INVALID_ARG, "%s: N must be a GPU number (0-%d)", text,
                         STK_MAX_GPUS - 1);
    out->index = (int)n;
    out->indexed = true;
    return STK_OK;
}

void stk_device_spec_name(const stk_device_spec *d, char *buf, size_t n)
{
    if (d->kind == STK_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "cuda:%d", d->index);
}

stk_status stk_device_spec_open(const stk_device_spec *d, const stk_copy_engine **ce)
{
    stk_status st = stk_copy_engine_open(d->kind, d->index, ce);
    if (st == STK_OK) return STK_OK;
    char name[32];
    stk_device_spec_name(d, name, sizeof name);
    if (st == STK_ERR_UNSUPPORTED)
        return stk_error(st,
                         "device %s: %s; use the cpu device (stoke devices lists what there is)",
                         name, stk_last_error());
    return stk_error_prefix(st, "device %s", name);
}
