#!/bin/sh
# docs/FORMAT.md is enough to read a dataset: an independent Python reader
# (tests/read_stoke.py, python3-lmdb) checks packed files against their sources.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
"$PYTHON3" -c 'import lmdb' 2>/dev/null || { echo "python3-lmdb missing: skipped"; exit 77; }

run 0 "$STOKE" pack "$FX/good" good.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" folder good.stoke "$FX/good"
expect out.txt "ok good.stoke: 11 records, 9 byte-identical"
run 0 "$STOKE" pack --shuffle --seed 9 "$FX/good" shuffled.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" folder shuffled.stoke "$FX/good"
run 0 "$STOKE" pack --from idx "$FX/idx" idx.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" idx idx.stoke "$FX/idx/train-images-idx3-ubyte.gz" "$FX/idx/train-labels-idx1-ubyte.gz"
expect out.txt "ok idx.stoke: 50 records"
finish
