#!/bin/sh
# stoke peek end to end: exact decode for comparison with other tools, grids,
# determinism, bad specs.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES

run 0 "$STOKE" pack "$FX/good" good.stoke
# --transform none --index I: the stored image as decoded, pixel for pixel what PIL decodes.
run 0 "$STOKE" peek --index 0 --transform none --out one.ppm good.stoke
expect out.txt "0	0	cat	cat/cat_0.jpg"
"$PYTHON3" - "$FX/good/cat/cat_0.jpg" <<'PY' || fail "peek --transform none differs from PIL's decode"
import sys
from PIL import Image
a = Image.open("one.ppm"); b = Image.open(sys.argv[1]).convert("RGB")
assert a.size == b.size and a.tobytes() == b.tobytes(), (a.size, b.size)
PY
# The default training transform, as a grid; labels on stdout.
run 0 "$STOKE" peek good.stoke
[ "$(wc -l < out.txt)" = 11 ] || fail "peek should list the 11 records"
expect err.txt "wrote peek.ppm"
expect err.txt "transform rrc:224,flip"
# --json: the same samples as one object
run 0 "$STOKE" peek --json --index 0 --transform none --out one.ppm good.stoke
"$PYTHON3" -c '
import json; d = json.load(open("out.txt"))
assert d["out"] == "one.ppm" and d["transform"] == "none", d
assert d["samples"] == [{"index": 0, "label": 0, "class": "cat", "source": "cat/cat_0.jpg"}], d
' || fail "peek --json"
run 0 "$STOKE" peek --count 4 --transform resize:64,center:48 --out grid.jpg good.stoke
# 2x2 cells of 48 pixels, each with a 7-pixel label strip under it, 2-pixel borders
"$PYTHON3" -c 'from PIL import Image; im = Image.open("grid.jpg"); assert im.size == (2 * 48 + 3 * 2, 2 * (48 + 7) + 3 * 2), im.size' \
    || fail "grid.jpg is not a 2x2 grid of 48-pixel cells with labels"
# PNG too; the label strip holds the class drawn in white
run 0 "$STOKE" peek --count 4 --transform resize:64,center:48 --out grid.png good.stoke
"$PYTHON3" - <<'PY' || fail "grid.png: no label under the first cell"
from PIL import Image
im = Image.open("grid.png").convert("L")
strip = [im.getpixel((x, y)) for x in range(2, 50) for y in range(51, 57)]
assert im.size == (102, 116) and strip.count(255) >= 20, (im.size, strip.count(255))
PY
# One sample at its exact size; the same (seed, epoch, index) gives the same bytes.
run 0 "$STOKE" peek --index 3 --seed 5 --transform rrc:32,flip --out a.ppm good.stoke
run 0 "$STOKE" peek --index 3 --seed 5 --transform rrc:32,flip --out b.ppm good.stoke
cmp -s a.ppm b.ppm || fail "the same sample gave other pixels"
run 0 "$STOKE" peek --index 3 --seed 5 --epoch 1 --transform rrc:32,flip --out c.ppm good.stoke
cmp -s a.ppm c.ppm && fail "another epoch gave the same crop"
"$PYTHON3" -c 'from PIL import Image; assert Image.open("a.ppm").size == (32, 32)' || fail "size"
# Raw grayscale data: the default is pad + random crop, written as PGM.
run 0 "$STOKE" pack --from idx "$FX/idx" idx.stoke
run 0 "$STOKE" peek --count 9 --out g.pgm idx.stoke
expect err.txt "transform pad:4,crop:28,flip"
head -c 2 g.pgm | grep -q P5 || fail "a 1-channel dataset should give a PGM"
# --count draws across the classes (every class before any twice), seeded,
# sorted by class: 10 of the 50 records show all ten classes
run 0 "$STOKE" peek --count 10 --seed 3 --out g.png idx.stoke
[ "$(cut -f2 out.txt | sort -u | wc -l)" = 10 ] || fail "--count 10 did not show the 10 classes"
cut -f2 out.txt | sort -n -c || fail "--count: not sorted by class"
cp out.txt s3.txt
run 0 "$STOKE" peek --count 10 --seed 3 --out g.png idx.stoke
cmp -s out.txt s3.txt || fail "--count with one seed drew other records"
run 0 "$STOKE" peek --count 10 --seed 4 --out g.png idx.stoke
cmp -s out.txt s3.txt && fail "--seed changed nothing in the draw"
# Bad input.
run 2 "$STOKE" peek --transform rrc:0 good.stoke
expect err.txt 'transform "rrc:0": size must be'
run 2 "$STOKE" peek --transform rrc:224,smudge good.stoke
expect err.txt 'transform "smudge": unknown transform (known: rrc'
run 2 "$STOKE" peek --transform rrc:224,colourjitter:0.4 good.stoke
expect err.txt 'transform "colourjitter:0.4": unknown transform (did you mean colorjitter?'
run 1 "$STOKE" peek --index 99 good.stoke
expect err.txt "past its 11 records"
run 2 "$STOKE" peek --out x.gif good.stoke
expect err.txt "--out x.gif: write .png, .ppm/.pgm (lossless) or .jpg"
run 2 "$STOKE" peek --index 1 --count 2 good.stoke
run 1 "$STOKE" peek missing.stoke
# a size meant for another dataset (Fashion-MNIST at 16384 px: 8 GB of grid)
run 0 "$STOKE" pack --from idx "$FX/idx" tiny.stoke
run 1 "$STOKE" peek --count 16 --transform resize:16384,center:16384 tiny.stoke
expect err.txt 'tiny.stoke: transform "resize:16384,center:16384" makes 16384x16384 images from images of at most 28x28 (more than 8 times the side)'
[ -e peek.ppm ] && [ peek.ppm -nt tiny.stoke ] && fail "a refused peek wrote its image"
run 0 "$STOKE" peek --count 2 --transform resize:224,center:224 --out up.pgm tiny.stoke

# On a full disk the previous image stays whole (temporary + rename): the
# write fails with ENOSPC, the old file is unchanged, no temporary is left.
if command -v strace >/dev/null && strace -f -o /dev/null true 2>/dev/null; then
    cp one.ppm keep.ppm
    # which write() is the image's first: the record's line goes to stdout
    # before it (line-buffered), and a sanitizer's runtime may write too
    strace -f -o writes.txt -e trace=write "$STOKE" peek --index 1 --transform none \
        --out probe.ppm good.stoke >/dev/null 2>&1
    nth=$(awk '/ write\(/ { n++ } / write\(.*"P6/ { print n; exit }' writes.txt)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        run 1 strace -f -o /dev/null -e inject=write:error=ENOSPC:when="${nth:-1}" \
        "$STOKE" peek --index 1 --transform none --out one.ppm good.stoke
    expect err.txt "one.ppm: write failed: No space left on device"
    cmp -s one.ppm keep.ppm || fail "a failed peek --out damaged the previous image"
    ls one.ppm.tmp.* 2>/dev/null && fail "a failed peek --out left its temporary"
fi
finish
