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
mkdir -p "$C/record" "$C/meta" "$C/dataset" "$C/safetensors" "$C/transform" "$C/list" "$C/jpeg" \
    "$C/run_log" "$C/jpeg_segments" "$C/image" "$C/onnx"

# onnx: the files torch.onnx.export wrote for the reader's tests
cp "$HERE/../tests/data/onnx/tiny_train.onnx" "$C/onnx/tiny_train"
cp "$HERE/../tests/data/onnx/tiny_eval.onnx" "$C/onnx/tiny_eval"

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
         "resize:64" "crop:8" "center:8,colorjitter:0.4:0.4:0.4:0.1,randomgrayscale" \
         "crop:6,trivialaugment,randaugment:3:20" "center:7,rotate:15,affine:10:2:-1:1.1:8:3" \
         "resize:9,equalize,autocontrast,posterize:3,solarize:100,sharpness:2,blur:3:0.8" \
         "crop:5,randomaffine:10:0.1:0.2:0.9:1.1:5,gaussianblur:3,randominvert,randomsharpness:2"; do
    printf '%s' "$s" > "$C/transform/t$i"; i=$((i + 1))
done
printf 'a/b.jpg 0\n# comment\n  spaced name.jpg   12\n/abs/path.jpg 3\n' > "$C/list/l0"
printf 'x.jpg 9999\ny.jpg 0\n\n' > "$C/list/l1"
cp "$FX/fix/list.txt" "$C/list/l2"

# run_log: metrics.csv NUL steps.csv as stoke train writes them (and an old
# run's metrics.csv alone, an empty validation column, a torn last line).
M='epoch,step,lr,train_loss,train_acc,val_loss,val_top1,val_top5,images_per_sec,stall_pct,seconds,mem_allocated_mb,mem_reserved_mb,mem_peak_mb,peak_rss_mb'
printf '%s\n1,3,0.0375,2.33,12.5,2.31,8,48,281.5,0.09,0.17,2.0,3.1,3.1,168.8\n2,6,0.0033,2.32,6.25,2.30,10,44,1093.5,0,0.04,2.0,3.1,3.1,169\n\0step,epoch,loss,lr\n1,1,2.28738,0.05\n2,1,2.3394,0.0466\n3,1,2.37,0.0375\n' "$M" >"$C/run_log/r0"
printf 'epoch,step,lr,train_loss,train_acc,val_loss,val_top1,val_top5,images_per_sec,stall_pct,seconds\n1,468,0.05,0.6,77,,,,1500,0.1,38\n2,936,0.02,0.4,85,,,,1600,0,37' >"$C/run_log/r1"
printf 'epoch,step\n1,1\n\0step,epoch,loss,lr\n1,1,nan,inf\n2,1,1e308,-1e308\n' >"$C/run_log/r2"

# jpeg: the small fixtures (every subsampling, gray, progressive, CMYK, restart markers).
for f in baseline cmyk gray gray128 odd_17x9 one_1x1 progressive restart sub420 sub422 sub444 \
         wide_2000x2; do
    cp "$FX/fix/single/$f.jpg" "$C/jpeg/"
done
# jpeg_segments: fixtures as `stoke pack` stores them with restart markers
# (intervals 1, 2 and 4 MCUs), the JPEG payloads taken out of the records.
mkdir -p "$FX/seg/a"
for f in baseline gray odd_17x9 one_1x1 restart sub420 sub422 sub444; do
    cp "$FX/fix/single/$f.jpg" "$FX/seg/a/"
done
for r in 1 2 4; do
    "$STOKE" pack --restart "$r" "$FX/seg" "$FX/seg$r.stoke" >/dev/null
done
/usr/bin/python3 - "$C/jpeg_segments" "$FX/seg1.stoke" "$FX/seg2.stoke" "$FX/seg4.stoke" <<'PY'
import lmdb, sys, os
out = sys.argv[1]
for n, path in enumerate(sys.argv[2:]):
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=2)
    recs = env.open_db(b"records", create=False)
    with env.begin() as txn:
        for i, (k, v) in enumerate(txn.cursor(db=recs)):
            v = bytes(v)
            jpeg = v[v.index(b"\xff\xd8\xff", 32):]  # after the 32-byte header and the name
            open(os.path.join(out, f"r{n}_{i}.jpg"), "wb").write(jpeg)
PY
# image: the other formats' fixtures (PNG, WebP, BMP, PPM/PGM)
for f in "$FX"/fix/formats/*; do
    case "$f" in *.rgb|*.l) ;; *) cp "$f" "$C/image/" ;; esac
done
cp "$FX"/fix/png/*.png "$C/image/"
du -sh "$C"
