#!/bin/sh
# Regenerate the committed seed corpus fuzz/corpus/<target>/ from the test
# fixtures (tests/fixtures/make_fixtures.py) and a built stoke.
#   fuzz/make_seeds.sh BUILD_DIR      e.g. fuzz/make_seeds.sh build
# Needs /usr/bin/python3 with python3-lmdb (scripts/install-deps.sh).
set -eu
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
STOKE=$BUILD/stoke
FX=$(mktemp -d)
trap 'rm -rf "$FX"' EXIT
/usr/bin/python3 "$HERE/../tests/fixtures/make_fixtures.py" "$FX/fix" >/dev/null
C=$HERE/corpus
rm -rf "$C"
mkdir -p "$C/record" "$C/meta" "$C/dataset" "$C/safetensors" "$C/transform" "$C/list" "$C/jpeg"

# dataset: small packed files (raw and JPEG), 20-72 KiB each.
"$STOKE" pack --from idx "$FX/fix/idx" "$FX/idx.stoke" >/dev/null
mkdir -p "$FX/two/a" "$FX/two/b"
cp "$FX/fix/single/one_1x1.jpg" "$FX/two/a/"
cp "$FX/fix/single/gray128.jpg" "$FX/two/b/"
"$STOKE" pack "$FX/two" "$FX/two.stoke" >/dev/null
# (no .stoke extension: .gitignore ignores packed files)
cp "$FX/idx.stoke" "$C/dataset/idx"
cp "$FX/two.stoke" "$C/dataset/two"

# record and meta: taken out of those files with python3-lmdb.
/usr/bin/python3 - "$C" "$FX/idx.stoke" "$FX/two.stoke" <<'PY'
import lmdb, sys, os
out = sys.argv[1]
for n, path in enumerate(sys.argv[2:]):
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=2)
    recs = env.open_db(b"records", create=False)
    meta = env.open_db(b"meta", create=False)
    with env.begin() as txn:
        for i, (k, v) in enumerate(txn.cursor(db=recs)):
            if i < 3:
                open(os.path.join(out, "record", f"{n}_{i}"), "wb").write(bytes(v))
        pairs = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=meta)]
    blob = b"".join(bytes(k) + b"\0" + bytes(v) + b"\0" for k, v in pairs)
    open(os.path.join(out, "meta", f"meta_{n}"), "wb").write(blob)
PY

# safetensors: a few tensors with metadata, as checkpoints hold them.
/usr/bin/python3 - "$C/safetensors" "$HERE/../tests/python" <<'PY'
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
import st_io
out = sys.argv[1]
st_io.save(out + "/small.safetensors",
           {"fc.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
            "fc.bias": np.zeros(3, dtype=np.float32),
            "bn.num_batches_tracked": np.array(7, dtype=np.int64)},
           {"format": "stoke-checkpoint", "format_version": "1", "model": "mlp",
            "note": "tab\tquote\"slash\\\\u0041"})
st_io.save(out + "/empty.safetensors", {}, {"format": "stoke-checkpoint"})
PY

# transform specs and list files: text.
i=0
for s in "rrc:224,flip" "rrc:96:0.25:1:0.5:2,flip:0.3" "resize:256,center:224,norm:imagenet" \
         "pad:4,crop:28,flip,norm" "norm:0.5:0.4:0.3/0.2:0.2:0.1" "none" "center:32" \
         "resize:64" "crop:8"; do
    printf '%s' "$s" > "$C/transform/t$i"; i=$((i + 1))
done
printf 'a/b.jpg 0\n# comment\n  spaced name.jpg   12\n/abs/path.jpg 3\n' > "$C/list/l0"
printf 'x.jpg 9999\ny.jpg 0\n\n' > "$C/list/l1"
cp "$FX/fix/list.txt" "$C/list/l2"

# jpeg: the small fixtures (every subsampling, gray, progressive, CMYK, restart markers).
for f in baseline cmyk gray gray128 odd_17x9 one_1x1 progressive restart sub420 sub422 sub444 \
         wide_2000x2; do
    cp "$FX/fix/single/$f.jpg" "$C/jpeg/"
done
du -sh "$C"
