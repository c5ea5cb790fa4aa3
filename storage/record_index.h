/* Locating LMDB's mapping of a file (private to storage/).
 *
 * LMDB does not expose its map address (mdb_env_info's me_mapaddr is NULL
 * unless MDB_FIXEDMAP), but a value pointer from mdb_get points into the
 * mapping; /proc/self/maps tells where that mapping starts and which file
 * offset it maps, so file offset = pointer - start + mapping offset.
 */
#pragma once

#include "common/status.h"

#include <stdint.h>

/* Find the mapping that contains `ptr`: *start gets the mapping's address
 * and *file_offset the file offset it begins at. The device and inode are not
 * compared (overlayfs shows the lower file's in /proc/self/maps, not the one
 * fstat reports); the caller verifies a few bytes with pread instead.
 * Errors: STK_ERR_IO (cannot read /proc/self/maps), STK_ERR_INTERNAL (no
 * mapping contains ptr). */
stk_status stk_find_mapping(const void *ptr, uintptr_t *start, uint64_t *file_offset);
