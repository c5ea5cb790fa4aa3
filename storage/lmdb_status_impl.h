/* The one translation of LMDB return codes into stk_status (private to storage/). */
#pragma once

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set the message "<what>: <LMDB's reason>" and return the matching status:
 * MDB_MAP_FULL -> STK_ERR_LIMIT, corruption codes -> STK_ERR_CORRUPT,
 * MDB_INVALID / MDB_VERSION_MISMATCH -> STK_ERR_FORMAT, ENOMEM -> STK_ERR_NOMEM,
 * anything else (ENOSPC, EIO, ...) -> STK_ERR_IO. */
stk_status stk_lmdb_status(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
