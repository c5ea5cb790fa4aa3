#include "storage/lmdb_status_impl.h"

#include <errno.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>

stk_status stk_lmdb_status(int rc, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    stk_status st;
    switch (rc) {
    case MDB_MAP_FULL: st = STK_ERR_LIMIT; break;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_BAD_TXN:
    case MDB_BAD_VALSIZE: st = STK_ERR_CORRUPT; break;
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_INCOMPATIBLE: st = STK_ERR_FORMAT; break;
    case ENOMEM: st = STK_ERR_NOMEM; break;
    default: st = STK_ERR_IO; break;
    }
    return stk_error(st, "%s: %s", what, mdb_strerror(rc));
}
