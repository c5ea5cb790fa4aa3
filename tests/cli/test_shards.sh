#!/bin/sh
# Shards: pack --shard-size writes NAME-0000k-of-0000N.stoke and NAME.shards;
# the list, or the files joined by commas, read as one dataset deliver the
# batches the same records packed in one file do (random and block order,
# every I/O backend, the static cache). Shards of different datasets, a
# missing shard and a bad size are refused with their names.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES

# 3,000 raw 28x28 images (2.4 MB): three shards of 1 MiB.
"$PYTHON3" - <<'PY' || fail "cannot write the IDX files"
import numpy as np
n = 3000
rng = np.random.default_rng(5)
labels = rng.integers(0, 10, n, dtype=np.uint8)
images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
with open("images-idx3-ubyte", "wb") as f:
    f.write(np.array([0x803, n, 28, 28], dtype=">u4").tobytes() + images.tobytes())
with open("labels-idx1-ubyte", "wb") as f:
    f.write(np.array([0x801, n], dtype=">u4").tobytes() + labels.tobytes())
PY
IDX="images-idx3-ubyte labels-idx1-ubyte"
run 0 "$STOKE" pack --from idx --shuffle --seed 2 $IDX one.stoke
run 0 "$STOKE" pack --from idx --shuffle --seed 2 --shard-size 1M --json $IDX part.stoke
expect out.txt '"shards": 3'
for k in 0 1 2; do
    [ -f part-0000$k-of-00003.stoke ] || fail "part-0000$k-of-00003.stoke missing"
done
[ -f part.stoke ] && fail "a sharded pack wrote part.stoke too"
ls -A | grep -q '^\.part' && fail "temporaries left behind: $(ls -A | grep '^\.part')"
grep -v '^#' part.shards >list.txt
printf 'part-00000-of-00003.stoke\npart-00001-of-00003.stoke\npart-00002-of-00003.stoke\n' >want.txt
cmp -s list.txt want.txt || fail "part.shards does not list the shards in order"
# each shard is a complete dataset of its own
run 0 "$STOKE" verify part-00001-of-00003.stoke
# verify and index take the list too: every shard's records and index
run 0 "$STOKE" verify part.shards
expect out.txt "part.shards: all 3000 records are good"
expect out.txt "part.shards: its record index agrees with the records"
run 0 "$STOKE" index part.shards
expect out.txt "part.shards: record index of 3000 records written"
run 0 "$STOKE" info --json part.shards
"$PYTHON3" -c 'import json; d=json.load(open("out.txt")); assert d["records"] == 3000, d' \
    || fail "info of the list: not 3000 records"

checksum() { "$PYTHON3" -c 'import json,sys; print(json.load(open("out.txt"))["checksum"])'; }
COMMAS=part-00000-of-00003.stoke,part-00001-of-00003.stoke,part-00002-of-00003.stoke
for order in random block; do
    B="--batch 64 --epochs 2 --order $order --block-mib 1 --block-window 2 --json"
    run 0 "$STOKE" bench $B one.stoke
    REF=$(checksum)
    for data in part.shards $COMMAS; do
        for io in uring pread mmap; do
            run 0 "$STOKE" bench $B --io $io $data
            [ "$(checksum)" = "$REF" ] || fail "$order order, --io $io: $data differs from one file"
        done
        run 0 "$STOKE" bench $B --direct --cache-mib 1 $data
        [ "$(checksum)" = "$REF" ] || fail "$order order, --direct --cache-mib 1: $data differs"
    done
done
# trains from shards
run 0 "$STOKE" train --data part.shards --model mlp --epochs 1 --batch 100 --out run
expect out.txt "done: 1 epoch"
# resumed on the shards in another order (other records at each index): refused
REV=part-00002-of-00003.stoke,part-00001-of-00003.stoke,part-00000-of-00003.stoke
run 1 "$STOKE" train --data $REV --model mlp --epochs 2 --batch 100 --out run --resume
expect err.txt "run/last.safetensors was trained on other records than --data $REV holds (it was --data part.shards)"
run 0 "$STOKE" train --data $COMMAS --model mlp --epochs 2 --batch 100 --out run --resume
expect out.txt "done: 1 epoch"

# refused: another dataset's file among the shards, a missing one, a bad size
run 0 "$STOKE" pack "$FX/good" photos.stoke
run 1 "$STOKE" bench part-00000-of-00003.stoke,photos.stoke
expect err.txt "part-00000-of-00003.stoke and photos.stoke differ in encoding: not shards of one dataset"
printf 'part-00000-of-00003.stoke\nnope.stoke\n' >broken.shards
run 1 "$STOKE" bench broken.shards
expect err.txt "nope.stoke: cannot open"
run 2 "$STOKE" pack --from idx --shard-size 10K $IDX small.stoke
expect err.txt "--shard-size 10K: expected a size of 1M..1T"
finish
