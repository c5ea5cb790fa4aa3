#!/bin/sh
# stoke pack end to end: sources, determinism, JPEG handling, bad inputs, flags.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES

# An image folder: summary, JSON, determinism across --workers.
run 0 "$STOKE" pack --workers 1 "$FX/good" one.stoke
expect out.txt "packed 11 records (3 classes) into one.stoke"
expect out.txt "0 stored as is, 9 given restart markers, 1 transcoded to baseline, 1 converted from CMYK, 0 resized"
expect err.txt "zebra_empty: class folder has no images (label 2 is kept)"
run 0 "$STOKE" pack --workers 2 --json "$FX/good" two.stoke
cmp -s one.stoke two.stoke || fail "--workers 1 and 2 give different files"
for key in records classes skipped bytes_in bytes_out seconds images_per_sec; do
    expect out.txt "\"$key\": "
done
"$PYTHON3" -c 'import json,sys; d=json.load(open("out.txt")); assert d["records"]==11 and d["classes"]==3, d' \
    || fail "pack --json is not the expected JSON"
run 0 "$STOKE" pack --workers 1 --shuffle --seed 5 "$FX/good" s1.stoke
run 0 "$STOKE" pack --workers 2 --shuffle --seed 5 "$FX/good" s2.stoke
cmp -s s1.stoke s2.stoke || fail "shuffled packs differ across --workers"
cmp -s s1.stoke one.stoke && fail "--shuffle changed nothing"
only_entries . 6 # 4 datasets + out.txt + err.txt: no temporaries, no lock files

# List and IDX sources; --classes.
run 0 "$STOKE" pack "$FX/list.txt" list.stoke
expect out.txt "packed 8 records (2 classes)"
printf 'feline\ncanine\n' > names.txt
run 0 "$STOKE" pack --from list --classes names.txt "$FX/list.txt" named.stoke
run 0 "$STOKE" info named.stoke
expect out.txt "canine"
run 0 "$STOKE" pack --from idx "$FX/idx" idx.stoke
expect out.txt "packed 50 records (10 classes)"
run 0 "$STOKE" pack --from idx "$FX/idx/train-images-idx3-ubyte.gz" "$FX/idx/train-labels-idx1-ubyte.gz" idx2.stoke
cmp -s idx.stoke idx2.stoke || echo "note: folder and two-path IDX packs differ only in their source text"
run 1 "$STOKE" pack --from idx --split test "$FX/idx" t.stoke
expect err.txt "no t10k-images-idx3-ubyte"

# --max-side re-encodes the large image.
run 0 "$STOKE" pack --max-side 64 --quality 80 "$FX/good" small.stoke
expect out.txt "7 resized" # every image with a side over 64
run 0 "$STOKE" info --json small.stoke
"$PYTHON3" -c 'import json; d=json.load(open("out.txt")); assert d["width"]["max"]<=64 and d["height"]["max"]<=64, d' \
    || fail "--max-side 64 left a larger image"

# Every kind of bad input stops pack with the file and the reason, leaving nothing.
reason() { # reason FILE TEXT
    rm -rf src && mkdir -p src/a src/b
    cp "$FX/good/cat/cat_0.jpg" src/a/
    cp "$FX/bad/$1" src/b/
    mkdir -p out
    run 1 "$STOKE" pack src out/x.stoke
    expect err.txt "stoke: src/b/$1: $2"
    only_entries out 0
}
reason zero.jpg "empty file"
reason text.jpg "not a JPEG"
reason anim.gif "a GIF image: not one of JPEG, PNG, WebP, BMP, PPM/PGM"
reason fake.webp "WebP: a damaged or truncated header"
reason truncated.jpg "bad JPEG: Premature end of JPEG file"
reason corrupt.jpg "bad JPEG"
reason soi_garbage.jpg "bad JPEG"
reason bomb.jpg "65500x65500"

# Other formats (PNG, WebP, BMP, PPM/PGM) are decoded and stored as JPEG at
# --quality: each record's pixels against PIL's decode of the original.
rm -rf src && mkdir -p src/a src/b
for f in "$FX"/formats/*.png "$FX"/formats/*.webp "$FX"/formats/*.bmp; do cp "$f" src/a/; done
cp "$FX"/formats/*.ppm "$FX"/formats/*.pgm "$FX"/formats/png_named.jpg "$FX/good/cat/cat_0.jpg" src/b/
run 0 "$STOKE" pack --quality 95 src formats.stoke
expect out.txt "packed 13 records (2 classes)"
expect out.txt "1 given restart markers"
expect out.txt "12 encoded from PNG/WebP/BMP/PPM" # png_named.jpg: a PNG, told by its bytes
# each_record DATA PREFIX MODE: every record of DATA (the files of src/ in
# order) against PIL's decode of its file: MODE psnr25 (PSNR of at least
# 25 dB: noisy 37x23 fixtures, 4:2:0) or lossless (equal; a JPEG within 1:
# libjpeg-turbo's decode against PIL's)
each_record() {
    i=0
    for f in $(cd src && find . -type f | sort); do
        run 0 "$STOKE" peek --index $i --transform none --out "$2$i.ppm" "$1"
        "$PYTHON3" - "src/$f" "$2$i.ppm" "$3" <<'PY' || fail "$1: $f: pixels far from PIL's decode ($3)"
import sys
import numpy as np
from PIL import Image
a = np.asarray(Image.open(sys.argv[1]).convert("RGB"), dtype=np.float64)
b = np.asarray(Image.open(sys.argv[2]).convert("RGB"), dtype=np.float64)
assert a.shape == b.shape, (a.shape, b.shape)
if sys.argv[3] == "lossless":
    jpeg = open(sys.argv[1], "rb").read(2) == b"\xff\xd8"
    sys.exit(0 if np.abs(a - b).max() <= (1 if jpeg else 0) else 1)
psnr = 10 * np.log10(255 ** 2 / max(((a - b) ** 2).mean(), 1e-9))
print(f"{sys.argv[1]}: {psnr:.1f} dB")
sys.exit(0 if psnr >= 25 else 1)
PY
        i=$((i + 1))
    done
}
each_record formats.stoke peek psnr25

# --store raw: the same folder stored losslessly as RGB pixels, which the
# loader reads
run 0 "$STOKE" pack --store raw src raw.stoke --json
expect out.txt '"records": 13'
run 0 "$STOKE" info --json raw.stoke
expect out.txt '"encoding": "raw'
expect out.txt "--store raw"
each_record raw.stoke raw lossless
run 0 "$STOKE" bench --epochs 1 --batch 4 --transform resize:32,center:32 raw.stoke
run 2 "$STOKE" pack --store raw --max-side 16 src x.stoke
expect err.txt "--max-side with --store raw"
run 2 "$STOKE" pack --from idx --store jpeg "$FX/idx" x.stoke
expect err.txt "--store jpeg: idx is stored as its raw pixels"
run 2 "$STOKE" pack --store png src x.stoke
expect err.txt "--store"

# Files that are not files.
rm -rf src && mkdir -p src/a out
cp "$FX/good/cat/cat_0.jpg" src/a/
ln -s loop.jpg src/a/loop.jpg
run 1 "$STOKE" pack src out/x.stoke
expect err.txt "src/a/loop.jpg: cannot open: Too many levels of symbolic links"
only_entries out 0
rm src/a/loop.jpg && mkfifo src/a/pipe.jpg
run 1 timeout 20 "$STOKE" pack src out/x.stoke
expect err.txt "src/a/pipe.jpg: not a regular file (a FIFO)"
rm src/a/pipe.jpg
ln -s /dev/null src/a/device.jpg
run 1 timeout 20 "$STOKE" pack src out/x.stoke
expect err.txt "src/a/device.jpg: not a regular file (a character device)"
rm src/a/device.jpg
cp "$FX/good/cat/cat_1.jpg" "$(printf 'src/a/bad\377name.jpg')"
run 1 "$STOKE" pack src out/x.stoke
expect err.txt 'src/a/bad\xFFname.jpg: file name is not valid UTF-8'
rm -f src/a/bad*
if [ "$(id -u)" != 0 ]; then # root reads anything
    cp "$FX/good/cat/cat_1.jpg" src/a/locked.jpg && chmod 000 src/a/locked.jpg
    run 1 "$STOKE" pack src out/x.stoke
    expect err.txt "locked.jpg: cannot open: Permission denied"
    rm -f src/a/locked.jpg
fi

# --skip-bad: skip, count and list them.
rm -rf src && mkdir -p src/good src/bad out
cp "$FX"/good/cat/*.jpg src/good/
cp "$FX"/bad/* src/bad/
run 0 "$STOKE" pack --skip-bad src out/x.stoke
expect out.txt "packed 6 records (2 classes)"
expect out.txt "skipped 8 bad inputs, listed in out/x.stoke.skipped.txt"
[ "$(wc -l < out/x.stoke.skipped.txt)" = 8 ] || fail "skipped list does not have 8 lines"
expect out/x.stoke.skipped.txt "src/bad/truncated.jpg	bad JPEG: Premature end of JPEG file"
rm -rf src/good
run 1 "$STOKE" pack --skip-bad src out/y.stoke
expect err.txt "every input was bad"

# A temporary left by a killed pack (its process gone) is removed by the next pack.
touch .again.stoke.pack-2147483600 .again.stoke.pack-2147483600.compact
run 0 "$STOKE" pack "$FX/good" again.stoke
[ -e .again.stoke.pack-2147483600 ] && fail "stale temporary not removed"
[ -e .again.stoke.pack-2147483600.compact ] && fail "stale compact temporary not removed"

# Limits the writer shares with every reader: a label past them is refused
# at its line, never packed into a file that info would then refuse.
printf '%s 3\n%s 10000000\n' "$FX/good/cat/cat_0.jpg" "$FX/good/cat/cat_1.jpg" > big.txt
run 1 "$STOKE" pack --from list big.txt big.stoke
expect err.txt "big.txt:2: label 10000000: labels are limited to 0..999999"
printf '%s 2147483647\n' "$FX/good/cat/cat_0.jpg" > max.txt
run 1 "$STOKE" pack --from list max.txt max.stoke
expect err.txt "max.txt:1: label 2147483647"
[ -e big.stoke ] || [ -e max.stoke ] && fail "a refused list left a dataset"
# A NUL byte inside a line is refused, not read as the end of the path.
printf '%s\0junk 1\n' "$FX/good/cat/cat_0.jpg" > nul.txt
run 1 "$STOKE" pack --from list nul.txt nul.stoke
expect err.txt "nul.txt:1: a NUL byte inside the line"
# An IDX input that is a FIFO is refused at once, not waited on.
mkdir -p fifo && mkfifo fifo/train-images-idx3-ubyte && cp "$FX"/idx/train-labels-idx1-ubyte.gz fifo/
run 1 timeout 20 "$STOKE" pack --from idx fifo fifo.stoke
expect err.txt "not a regular file"

# Usage errors exit 2.
run 2 "$STOKE" pack
run 2 "$STOKE" pack "$FX/good"
run 2 "$STOKE" pack --workers 0 "$FX/good" x.stoke
expect err.txt "--workers 0: expected an integer in 1..1024"
run 2 "$STOKE" pack --from bogus "$FX/good" x.stoke
run 2 "$STOKE" pack --frobnicate "$FX/good" x.stoke
expect err.txt "unknown option '--frobnicate'"
run 2 "$STOKE" pack --quality 101 "$FX/good" x.stoke
run 2 "$STOKE" pack "$FX/good" .
run 1 "$STOKE" pack /nonexistent/dir x.stoke
expect err.txt "/nonexistent/dir"
# A folder of train/ and val/ folders is splits, not classes: refused with a
# hint; --split picks one (val also as valid/ or validation/).
mkdir -p splits/train splits/valid
cp -r "$FX/good/"* splits/train/
cp -r "$FX/good/"* splits/valid/
run 1 "$STOKE" pack splits splits.stoke
expect err.txt "splits: its folders train/, valid/ are splits, not classes: pack one with --split train"
[ -e splits.stoke ] && fail "a split layout was packed as classes"
run 0 "$STOKE" pack --split val splits val.stoke
expect out.txt "packed 11 records (3 classes) into val.stoke"
run 1 "$STOKE" pack --split test splits t.stoke
expect err.txt "--split test: splits has no such folder (it holds train/, valid/)"
run 1 "$STOKE" pack --split train "$FX/good" t.stoke
expect err.txt "holds class folders, not train/val/test folders"
finish
