#!/bin/sh
# examples/train_pytorch.py runs its loop with each source of batches
# (stoke.Loader, PyTorch's DataLoader over the folder, no loader) and prints
# the JSON it promises; the loss is finite and the batches are the right shape.
. "$STOKE_TESTS/cli/lib.sh"
if ! "$PYTHON3" -c "import torch, torchvision" 2>/dev/null; then
    echo "skipped: no torch/torchvision for $PYTHON3"
    exit 77
fi
EX="$STOKE_TESTS/../examples/train_pytorch.py"
# ImageFolder refuses the fixtures' empty class folder: the two others
mkdir -p photos && cp -r "$STOKE_FIXTURES/good/cat" "$STOKE_FIXTURES/good/dog" photos/
run 0 "$STOKE" pack photos jpeg.stoke
for mode in "" "--torch-loader photos" "--synthetic"; do
    "$PYTHON3" "$EX" jpeg.stoke --steps 2 --warmup 1 --batch 4 --size 32 --json $mode \
        >out.json 2>err.txt || fail "train_pytorch.py $mode: $(cat err.txt)"
    "$PYTHON3" - out.json "$mode" <<'PY' || fail "train_pytorch.py $mode: $(cat out.json)"
import json, math, sys
r = json.load(open(sys.argv[1]))
want = {"--synthetic": "none", "": "stoke.Loader"}.get(sys.argv[2], "torch.DataLoader")
assert r["loader"].startswith(want), r
assert r["images_per_sec"] > 0 and 0 <= r["data_wait_pct"] <= 100, r
assert math.isfinite(r["last_loss"]) and r["steps"] == 2 and r["batch"] == 4, r
PY
done
# a bad path is the library's message, not a traceback
"$PYTHON3" "$EX" missing.stoke --steps 1 >out.txt 2>&1 && fail "missing file accepted"
expect out.txt "train_pytorch.py: missing.stoke: cannot open"
grep -q Traceback out.txt && fail "a traceback: $(cat out.txt)"
finish
