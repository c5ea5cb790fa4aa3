/* A validating reader of LMDB's on-disk format (0.9, 64-bit, little-endian),
 * for Stoke's read path.
 *
 *     stk_lmdb_file f;
 *     if (stk_lmdb_file_init(&f, map, size) != STK_OK) return fail(stk_last_error());
 *     stk_lmdb_db recs;
 *     if (stk_lmdb_file_find_db(&f, "records", &recs) != STK_OK) ...;  // STK_END: none
 *     stk_lmdb_file_walk(&f, "records", on_entry, ctx);  // every (key, value) in key order
 *     stk_lmdb_file_deinit(&f);
 *
 * Why not liblmdb: LMDB trusts its file by design, and Debian's 0.9.24
 * predates even the fixes for the crafted files of CVE-2019-16224..16227.
 * One flipped byte in a page header or a node offset makes mdb_env_open,
 * mdb_dbi_open, mdb_get or a cursor walk read wild memory or abort. A packed
 * dataset never changes after `pack`, so its reader needs none of LMDB's
 * transactions, locks or free lists: reading the B+tree straight from the
 * bytes, checking every field before it is used, costs no more than the
 * cursor walk the dataset made anyway. liblmdb stays the writer, and the
 * tests cross-check both readers on the same files.
 *
 * What is checked (errors are STK_ERR_CORRUPT, "damaged (what, where)"):
 *   - the two meta pages: magic, version 1, page size a power of two in
 *     [256, 32768] and equal in both, last page inside the file; the meta
 *     with the higher transaction id is used, as LMDB does;
 *   - every page reached from a database's root: number in [2, last page],
 *     equal to the page's own number, visited once over the whole file,
 *     flags exactly BRANCH or LEAF (no DIRTY, LEAF2, SUBP: flags Stoke's
 *     writer never produces), 16 <= lower <= upper <= page size, at least
 *     one node, every node and its key and inline data inside the page;
 *   - the tree: depth at most 32 and equal for every leaf to the database
 *     record's depth; branch, leaf, overflow page and entry counts equal to
 *     the record's; keys strictly ascending across the whole walk;
 *   - values: overflow runs ("big data") inside [2, last page], not sharing
 *     a page with any other page or run; database flags other than 0 and
 *     duplicate-key nodes are refused.
 * Not read: an overflow run's own page header (one random read per large
 * record at open; nothing is derived from it: the run's place and length come
 * from the leaf, and the record's CRC checks its bytes).
 *
 * Ownership: the file does not own `base`; keep it mapped while using the
 * file and the offsets it reports. Threading: walks write the visited-page
 * bitmap, so one thread at a time per stk_lmdb_file.
 */
#pragma once

#include "common/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A database record (LMDB's MDB_db), read from a meta page or a leaf. */
typedef struct stk_lmdb_db {
    uint16_t flags;
    uint16_t depth;
    uint64_t branch_pages, leaf_pages, overflow_pages, entries;
    uint64_t root; /* UINT64_MAX: empty */
} stk_lmdb_db;

typedef struct stk_lmdb_file {
    const uint8_t *base;
    uint64_t size;      /* bytes at base */
    uint32_t page_size; /* from the meta pages */
    uint64_t last_page; /* highest page number in use */
    uint64_t txnid;
    stk_lmdb_db main;  /* the main database: names -> named databases */
    uint64_t *visited; /* one bit per page, pages already walked */
    void *named;       /* the named databases read from the main one */
} stk_lmdb_file;

/* Read and check the meta pages of the LMDB file in base[0..size), and the
 * main database (the names of the named databases). Errors:
 * STK_ERR_FORMAT (not an LMDB file: no magic on either meta page, or another
 * LMDB version; a main database holding something else than named databases), STK_ERR_CORRUPT
 * ("damaged (...)", or truncated: smaller than its meta page says), STK_ERR_NOMEM. */
stk_status stk_lmdb_file_init(stk_lmdb_file *f, const uint8_t *base, uint64_t size);

/* Free the bitmap. Safe on a zeroed or failed file. */
void stk_lmdb_file_deinit(stk_lmdb_file *f);

/* The record of named database `name`. STK_END (not an error): no such name. */
stk_status stk_lmdb_file_find_db(const stk_lmdb_file *f, const char *name, stk_lmdb_db *out);

/* Called for every entry in key order: the key (inside the page) and the
 * value's place in the file, base[value_offset .. +value_len). A non-zero
 * return stops the walk and is returned. */
typedef stk_status (*stk_lmdb_entry_fn)(void *ctx, const uint8_t *key, uint32_t key_len,
                                        uint64_t value_offset, uint64_t value_len);

/* Walk named database `name` in key order, checking each page before reading
 * it (the list above). STK_END: no such name. Each database may be walked
 * once per file: a second walk finds its pages already claimed and reports
 * them as reached twice. */
stk_status stk_lmdb_file_walk(stk_lmdb_file *f, const char *name, stk_lmdb_entry_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
