"""Damaged copies of a dataset packed from the fixtures' JPEG folder, the
three docs/datasets.md shows: flipped.stoke (a payload byte of record 3:
its CRC), mutant.stoke (an LMDB page's node offset) and mutant2.stoke (a
meta value changed in place: the meta checksum).

    damage.py DATA.stoke
"""
import struct
import sys

import lmdb

path = sys.argv[1]
orig = open(path, "rb").read()

env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=2)
records = env.open_db(b"records", create=False)
with env.begin() as txn:
    value = bytes(txn.get(struct.pack(">Q", 3), db=records))
env.close()
b = bytearray(orig)
at = b.find(value)
assert at > 0 and b.find(value, at + 1) < 0
b[at + len(value) - 100] ^= 0x10
open("flipped.stoke", "wb").write(b)

b = bytearray(orig)
PS = 4096
flags = struct.unpack_from("<H", b, 2 * PS + 10)[0]
assert flags & 0x03, "page 2 is a branch or leaf page"
struct.pack_into("<H", b, 2 * PS + 16, PS - 2)  # node 0 at the page's last two bytes
open("mutant.stoke", "wb").write(b)

b = bytearray(orig)
at = b.find(b"cat\ndog")
assert at > 0
b[at] ^= 0x20  # "cat" -> "Cat"
open("mutant2.stoke", "wb").write(b)
