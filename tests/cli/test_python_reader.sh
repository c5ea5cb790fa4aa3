#!/bin/sh
# docs/FORMAT.md is enough to read a dataset: an independent Python reader
# (tests/read_stoke.py, python3-lmdb) checks packed files against their sources.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
"$PYTHON3" -c 'import lmdb' 2>/dev/null || { echo "python3-lmdb missing: skipped"; exit 77; }

run 0 "$STOKE" pack --restart 0 "$FX/good" good.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" folder good.stoke "$FX/good"
expect out.txt "ok good.stoke: 11 records, 9 byte-identical to their source file, 0 with"
# the default: baseline (and progressive) files rewritten with restart markers,
# the same pixels; the CMYK one is re-encoded
run 0 "$STOKE" pack "$FX/good" restart.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" folder restart.stoke "$FX/good"
expect out.txt "ok restart.stoke: 11 records, 0 byte-identical to their source file, 10 with restart markers and the same pixels"
run 0 "$STOKE" pack --shuffle --seed 9 "$FX/good" shuffled.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" folder shuffled.stoke "$FX/good"
run 0 "$STOKE" pack --from idx "$FX/idx" idx.stoke
run 0 "$PYTHON3" "$STOKE_TESTS/read_stoke.py" idx idx.stoke "$FX/idx/train-images-idx3-ubyte.gz" "$FX/idx/train-labels-idx1-ubyte.gz"
expect out.txt "ok idx.stoke: 50 records"
finish
