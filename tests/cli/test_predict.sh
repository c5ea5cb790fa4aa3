#!/bin/sh
# stoke predict: a checkpoint's classes for files, folders (recursively) and
# .stoke records. A baseline JPEG gives the same answer as a file and as the
# record stoke pack stored it in; PNG, progressive, CMYK and grey JPEGs are
# read; damaged files and non-images are skipped and named, the rest still
# predicted; exit 1 only when nothing could be read; --json lines; the
# class names training kept.
. "$STOKE_TESTS/cli/lib.sh"
F=$STOKE_FIXTURES
run 0 "$STOKE" pack --from imagefolder "$F/good" rgb.stoke
run 0 "$STOKE" train --data rgb.stoke --model cnn --batch 4 --epochs 1 --workers 2 \
    --transform rrc:32,flip --no-tensorboard --out run
mkdir -p imgs/sub
cp "$F"/good/cat/*.jpg imgs/
cp "$F/single/progressive.jpg" "$F/single/cmyk.jpg" "$F/single/gray.jpg" imgs/sub/
cp "$F/png/rgb8.png" "$F/png/p4.png" "$F/png/l16.png" imgs/
cp "$F/bad/corrupt.jpg" "$F/bad/text.jpg" imgs/
cp "$F/png/bad_crc.png" imgs/sub/
echo notes > imgs/notes.txt
run 0 "$STOKE" predict run/best.safetensors imgs rgb.stoke missing.jpg --top-k 2 --workers 2
expect out.txt "imgs/sub/cmyk.jpg: "
expect out.txt "imgs/p4.png: "
expect out.txt "rgb.stoke#10: "
expect err.txt "skipped imgs/corrupt.jpg: "
expect err.txt "skipped imgs/text.jpg: not an image Stoke reads (JPEG, PNG, WebP, BMP, PPM/PGM)"
expect err.txt "skipped imgs/sub/bad_crc.png: PNG: "
expect err.txt "skipped missing.jpg: cannot open"
expect err.txt "images/s), 4 skipped, 1 file in folders without an image name not read"
[ "$(wc -l < out.txt)" = 23 ] || fail "23 predictions expected, $(wc -l < out.txt) printed"
grep -q "notes.txt" out.txt err.txt && fail "notes.txt was read"
# the same image as a file and as its record: the same answer
for i in 0 1 2 3 4 5; do
    a=$(grep "^imgs/cat_$i.jpg: " out.txt | sed 's/^[^:]*: //')
    b=$(grep "^rgb.stoke#$i: " out.txt | sed 's/^[^:]*: //')
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "cat_$i.jpg: '$a' as a file, '$b' as rgb.stoke#$i"
done
# --json: a line per image, the names training kept, probabilities adding up
run 0 "$STOKE" predict run/best.safetensors imgs/cat_0.jpg imgs/rgb8.png --json --top-k 3
"$PYTHON3" - <<'PY' || fail "--json"
import json
rows = [json.loads(l) for l in open("out.txt")]
assert [r["path"] for r in rows] == ["imgs/cat_0.jpg", "imgs/rgb8.png"], rows
for r in rows:
    assert sorted(t["class"] for t in r["top"]) == ["cat", "dog", "zebra_empty"], r
    assert abs(sum(t["probability"] for t in r["top"]) - 1) < 1e-5, r
    p = [t["probability"] for t in r["top"]]
    assert p == sorted(p, reverse=True), r
PY
# predict on the records agrees with stoke eval --per-class, class by class
run 0 "$STOKE" predict run/best.safetensors rgb.stoke --top-k 1 --json
cp out.txt pred.json
run 0 "$STOKE" eval --data rgb.stoke --checkpoint run/best.safetensors --per-class --json
"$PYTHON3" - <<'PY' || fail "predict and eval --per-class disagree"
import json
ev = json.load(open("out.txt"))
pc = ev["per_class"]
assert [c["class"] for c in pc] == ["cat", "dog", "zebra_empty"], pc
assert sum(c["images"] for c in pc) == ev["images"] == 11, ev
right = sum(round(c["top1"] * c["images"] / 100) for c in pc if c["images"])
assert abs(100 * right / ev["images"] - ev["val_top1"]) < 1e-3, ev
labels = ["cat"] * 6 + ["dog"] * 5  # pack's order: classes, then names
pred = [json.loads(l)["top"][0]["class"] for l in open("pred.json")]
for c in pc:
    mine = sum(1 for p, l in zip(pred, labels) if l == c["class"] and p == l)
    assert c["images"] == 0 or mine == round(c["top1"] * c["images"] / 100), (c, pred)
PY
run 0 "$STOKE" eval --data rgb.stoke --checkpoint run/best.safetensors --per-class
expect out.txt "  zebra_empty                     0        -"
# nothing readable: exit 1; bad usage: exit 2
run 1 "$STOKE" predict run/best.safetensors imgs/text.jpg
expect err.txt "no image could be read"
run 2 "$STOKE" predict run/best.safetensors imgs --transform center:64
expect err.txt "the model takes 32 px"
run 2 "$STOKE" predict run/best.safetensors imgs --transform "wobble:3"
expect err.txt "--transform wobble:3"
run 1 "$STOKE" predict rgb.stoke imgs
expect err.txt "rgb.stoke"
# a grey model takes colour files (PIL's L conversion)
run 0 "$STOKE" pack --from idx "$F/idx" tiny.stoke
run 0 "$STOKE" train --data tiny.stoke --model mlp --batch 25 --epochs 1 --no-tensorboard --out g
run 0 "$STOKE" predict g/last.safetensors imgs/rgb8.png "$F/single/large.jpg" --transform center:28
expect out.txt "imgs/rgb8.png: "
finish
