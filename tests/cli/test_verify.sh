#!/bin/sh
# stoke verify end to end: clean files, a flipped byte, a JPEG that does not decode.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES

run 0 "$STOKE" pack "$FX/good" good.stoke
run 0 "$STOKE" verify good.stoke
expect out.txt "good.stoke: all 11 records are good (header, CRC, label)"
run 0 "$STOKE" verify --decode --workers 2 good.stoke
expect out.txt "full decode"

# Flip one payload byte of record 3 (found with the Python reader's view of the file).
cp good.stoke flipped.stoke
"$PYTHON3" - <<'PY' || fail "could not damage the file"
import lmdb, struct
env = lmdb.open("flipped.stoke", subdir=False, readonly=True, lock=False, max_dbs=2)
db = env.open_db(b"records", create=False)
with env.begin() as txn:
    value = bytes(txn.get(struct.pack(">Q", 3), db=db))
env.close()
data = bytearray(open("flipped.stoke", "rb").read())
at = data.find(value)
assert at > 0 and data.find(value, at + 1) < 0
data[at + len(value) - 100] ^= 0x10
open("flipped.stoke", "wb").write(data)
PY
run 1 "$STOKE" verify flipped.stoke
expect out.txt "record 3 (cat/cat_3.jpg): CRC mismatch"
expect out.txt "1 of 11 records are bad"

# A damaged JPEG packed with --no-validate: the CRC is right, the decode is not.
mkdir -p src/a && cp "$FX/bad/corrupt.jpg" "$FX/good/cat/cat_0.jpg" src/a/
run 0 "$STOKE" pack --no-validate src novalid.stoke
run 0 "$STOKE" verify novalid.stoke
run 1 "$STOKE" verify --decode novalid.stoke
expect out.txt "record 1 (a/corrupt.jpg): bad JPEG"

# A class name that is not UTF-8 (pack never writes one; the meta's checksum
# made right): refused at open by verify, info and info --json alike
# (it once reached info --json as raw bytes, and verify called the file good).
cp good.stoke latin1.stoke
"$PYTHON3" - "$STOKE_TESTS" <<'PY' || fail "making latin1.stoke"
import sys, lmdb
sys.path.insert(0, sys.argv[1])
from read_stoke import crc32c
env = lmdb.open("latin1.stoke", subdir=False, lock=False, max_dbs=2, map_size=1 << 30)
db = env.open_db(b"meta", create=False)
with env.begin(write=True) as txn:
    names = bytes(txn.get(b"classes", db=db))
    txn.put(b"classes", names.replace(b"cat", b"c\xe4t", 1), db=db)
    crc = 0
    for k, v in txn.cursor(db=db):
        if bytes(k) != b"checksum":
            crc = crc32c(bytes(k) + b"\0" + bytes(v) + b"\0", crc)
    txn.put(b"checksum", f"{crc:08x}".encode(), db=db)
env.close()
PY
for cmd in verify info "info --json"; do
    run 1 "$STOKE" $cmd latin1.stoke
    expect err.txt "latin1.stoke: meta: the name of class 0 is not UTF-8"
done
# --json: the same verdict as one object (valid JSON, the bad records named)
run 1 "$STOKE" verify --json flipped.stoke
"$PYTHON3" -c '
import json
d = json.load(open("out.txt"))
assert d["good"] is False and d["bad"] == 1 and d["records"] == 11, d
r = d["bad_records"][0]
assert r["index"] == 3 and "CRC mismatch" in r["reason"] and r["name"] is None, r
' || fail "verify --json on flipped.stoke: $(cat out.txt)"
run 0 "$STOKE" verify --json --decode good.stoke
"$PYTHON3" -c '
import json
d = json.load(open("out.txt"))
assert d["good"] is True and d["bad"] == 0 and d["decode"] is True and d["bad_records"] == [], d
' || fail "verify --json on good.stoke: $(cat out.txt)"
run 1 "$STOKE" verify missing.stoke
run 2 "$STOKE" verify --workers x good.stoke
# the record index: pack writes it, verify checks it against the tree; a
# damaged one is named by verify (exit 1), while info still opens the file
# (by the walk, with a warning); stoke index writes it anew
run 0 "$STOKE" verify good.stoke
expect out.txt "good.stoke: its record index agrees with the records"
cp good.stoke idx.stoke
"$PYTHON3" -c '
d = bytearray(open("idx.stoke", "rb").read())
i = d.find(b"STKINDX1")
assert i > 0
d[i + 32 + 5] ^= 0x40
open("idx.stoke", "wb").write(d)
' || fail "no record index in a packed file"
run 1 "$STOKE" verify idx.stoke
expect out.txt "idx.stoke: record index: its entries do not match their CRC"
run 0 "$STOKE" info idx.stoke
expect err.txt "idx.stoke: its record index cannot be used (its entries do not match their CRC)"
run 0 "$STOKE" index idx.stoke
expect out.txt "idx.stoke: record index of"
run 0 "$STOKE" verify --json idx.stoke
expect out.txt '"index": {"present": true, "ok": true, "problem": null}'
run 0 "$STOKE" info idx.stoke
[ -s err.txt ] && fail "info warned after stoke index: $(cat err.txt)"
run 1 "$STOKE" index missing.stoke
expect err.txt "missing.stoke"
finish
