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

run 1 "$STOKE" verify missing.stoke
run 2 "$STOKE" verify --workers x good.stoke
finish
