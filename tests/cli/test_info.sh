#!/bin/sh
# stoke info, help and version end to end.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES

run 0 "$STOKE" pack --from idx "$FX/idx" idx.stoke
run 0 "$STOKE" info idx.stoke
expect out.txt "format      stoke-dataset version 2"
expect out.txt "records     50"
expect out.txt "encoding    raw_u8, 1 channel"
expect out.txt "image size  28x28 (every record)"
expect out.txt "packed with stoke"
grep -qE '^ +7 +7 +5$' out.txt || fail "class 7 should have 5 records"
run 0 "$STOKE" info --json idx.stoke
"$PYTHON3" - <<'PY' || fail "info --json"
import json
d = json.load(open("out.txt"))
assert d["records"] == 50 and d["version"] == 2 and d["encoding"] == "raw_u8"
assert len(d["classes"]) == 10 and sum(c["count"] for c in d["classes"]) == 50
assert len(d["mean"]) == 1 and 0.4 < d["mean"][0] < 0.6, d["mean"]
PY
run 0 "$STOKE" pack "$FX/good" good.stoke
run 0 "$STOKE" info good.stoke
expect out.txt "encoding    jpeg, 3 channels"
expect out.txt "image size  width 33..640, height 47..480"
expect out.txt "zebra_empty"

# Damaged and foreign files: a clear message, exit 1.
head -c 100000 good.stoke > cut.stoke
run 1 "$STOKE" info cut.stoke
expect err.txt "stoke: cut.stoke: file is truncated"
printf 'hello' > tiny.stoke
run 1 "$STOKE" info tiny.stoke
expect err.txt "not a Stoke dataset"
run 1 "$STOKE" info missing.stoke
expect err.txt "stoke: missing.stoke: cannot open: No such file or directory"
run 2 "$STOKE" info
run 2 "$STOKE" info a b

# help and version
run 0 "$STOKE" --version
expect out.txt "stoke 0."
run 0 "$STOKE" help
for c in pack info verify peek bench; do expect out.txt "  $c "; done
for c in pack info verify peek bench; do
    run 0 "$STOKE" help $c
    cp out.txt help1.txt
    run 0 "$STOKE" $c --help
    cmp -s out.txt help1.txt || fail "stoke help $c and stoke $c --help differ"
    expect out.txt "usage: stoke $c"
done
run 2 "$STOKE"
run 2 "$STOKE" frobnicate
expect err.txt "no command 'frobnicate'"
run 2 "$STOKE" help frobnicate

# Class names from the file reach the terminal escaped: ESC and the C1 CSI
# (U+009B) as \xNN, never as raw control bytes.
mkdir -p esc/"$(printf 'a\033[31mred')" esc/"$(printf 'b\302\233c')"
cp "$FX/good/cat/cat_0.jpg" esc/"$(printf 'a\033[31mred')"/
cp "$FX/good/cat/cat_1.jpg" esc/"$(printf 'b\302\233c')"/
run 0 "$STOKE" pack esc esc.stoke
run 0 "$STOKE" info esc.stoke
expect out.txt 'a\x1B[31mred'
expect out.txt 'b\xC2\x9Bc'
LC_ALL=C grep -q "$(printf '\033')" out.txt && fail "info printed a raw escape byte"

# A checkpoint: the model, its classes by name (escaped too), how it was
# trained; an exported weights file; --json
run 0 "$STOKE" train --data esc.stoke --model cnn --batch 2 --epochs 2 --workers 2 \
    --transform center:32 --no-tensorboard --out run
run 0 "$STOKE" info run/last.safetensors
expect out.txt "run/last.safetensors: Stoke checkpoint"
expect out.txt "model    cnn: 3 channels, 32 px, 2 classes"
expect out.txt 'classes  a\x1B[31mred, b\xC2\x9Bc'
expect out.txt "trained  2 epochs, 2 steps (sgd"
LC_ALL=C grep -q "$(printf '\033')" out.txt && fail "info printed a raw escape byte"
run 0 "$STOKE" info --json run/last.safetensors
"$PYTHON3" - <<'PY' || fail "info --json of a checkpoint"
import json
j = json.load(open("out.txt"))
assert j["model"] == "cnn" and j["classes"] == 2 and j["epoch"] == 2 and j["step"] == 2, j
assert j["class_names"] == ["a\x1b[31mred", "b\u009bc"], j["class_names"]
assert j["format"] == "stoke-checkpoint" and len(j["sha256"]) == 64, j
assert j["transform"] == "center:32" and j["data"] == "esc.stoke", j
PY
run 0 "$STOKE" export run/last.safetensors --format safetensors --out w.safetensors
run 0 "$STOKE" info w.safetensors
expect out.txt "w.safetensors: weights only (stoke export)"
printf 'not a checkpoint' > fake.safetensors
run 1 "$STOKE" info fake.safetensors
expect err.txt "fake.safetensors"
finish
