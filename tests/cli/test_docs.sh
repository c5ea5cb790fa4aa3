#!/bin/sh
# The docs stay true: every `stoke` command in README.md and docs/*.md parses
# with today's flags (tests/docs/check_commands.py, STOKE_PARSE_ONLY); the
# README's quick start and its PyTorch loop run as written, on a 1,000-image
# cut of Debian's Fashion-MNIST (the same IDX files, fewer records).
. "$STOKE_TESTS/cli/lib.sh"
SRC="$STOKE_TESTS/.."
FM=/usr/share/datasets/fashion-mnist
run 0 "$PYTHON3" "$STOKE_TESTS/docs/check_commands.py" "$SRC" "$STOKE"
cat out.txt >&2
[ -d "$FM" ] || { echo "skipped the README's run: no $FM (dataset-fashion-mnist)"; finish; exit 77; }
# (the quick start's code runs under the sanitizers in the tests of each
# command; here only the release build runs it, to keep their time)
[ -z "${STOKE_SANITIZE:-}" ] || { echo "the README's run: release build only"; finish; exit 0; }
# the first N records of each IDX file, as IDX files (gzip, the same headers)
"$PYTHON3" - "$FM" small <<'PY' || fail "could not cut Fashion-MNIST"
import gzip, os, struct, sys
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for split, n in (("train", 1000), ("t10k", 200)):
    for kind, item in (("images-idx3", 784), ("labels-idx1", 1)):
        name = f"{split}-{kind}-ubyte.gz"
        data = gzip.open(os.path.join(src, name)).read()
        head = 16 if item == 784 else 8
        magic_dims = bytearray(data[:head])
        struct.pack_into(">I", magic_dims, 4, n)
        gzip.open(os.path.join(out, name), "wb").write(bytes(magic_dims) + data[head:head + n * item])
PY
# the quick start's block, with the binary and the data put in
awk '/^## Quick start/ {q = 1} q && /^```sh/ {b = 1; next} b && /^```/ {exit} b' "$SRC/README.md" |
    sed "s|^S=build/stoke|S=\"$STOKE\"|; s|^F=/usr/share/datasets/fashion-mnist|F=small|" > quick.sh
grep -q '^\$S train ' quick.sh || fail "README.md: no quick start block found"
run 0 sh -e -x quick.sh
expect out.txt "top-1"
[ -s runs/cnn/best.onnx ] || fail "the quick start's export wrote no runs/cnn/best.onnx"
expect out.txt "fm-test.stoke#1"
# the PyTorch loop, with the data put in (where this build has the Python module)
PYMOD="$(dirname "$STOKE")/python"
if [ ! -d "$PYMOD/stoke" ]; then
    echo "the README's PyTorch loop not run: no Python module in this build"
    finish
    exit 0
fi
awk '/^## The loader in your PyTorch loop/ {q = 1} q && /^```python/ {b = 1; next} b && /^```/ {exit} b' \
    "$SRC/README.md" | sed "s|/usr/share/datasets/fashion-mnist|small|" > loop.py
grep -q "stoke.Loader" loop.py || fail "README.md: no PyTorch loop found"
run 0 env PYTHONPATH="$PYMOD" "$PYTHON3" loop.py
finish
