#!/bin/sh
# stoke train's TensorBoard event file read by TensorBoard's own reader
# (the test venv, scripts/make-venv.sh): every step's loss and lr exactly as
# steps.csv has them, the epoch figures of metrics.csv, memory, the first
# batch as a picture, the flags as text, the gradient norm and the per-class
# figures (--clip-grad-norm, --per-class); a flipped byte is data loss.
. "$STOKE_TESTS/cli/lib.sh"
VPY=${STOKE_VENV_PYTHON:-}
if [ -z "$VPY" ] || ! "$VPY" -c "import tensorboard" 2>/dev/null; then
    echo "skipped: no TensorBoard in the test venv (scripts/make-venv.sh)"
    exit 77
fi
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
run 0 "$STOKE" pack "$STOKE_FIXTURES/good" jpeg.stoke
run 0 "$STOKE" train --data tiny.stoke --val tiny.stoke --batch 8 --threads 2 --model cnn \
    --epochs 3 --out gray --per-class --clip-grad-norm 5
"$VPY" "$STOKE_TESTS/python/check_tfevents.py" gray 8 cnn per-class >check.txt 2>&1 ||
    fail "gray: $(cat check.txt)"
# colour JPEGs, without validation
run 0 "$STOKE" train --data jpeg.stoke --batch 4 --threads 2 --model mlp --transform rrc:32,flip \
    --epochs 2 --out colour
"$VPY" "$STOKE_TESTS/python/check_tfevents.py" colour 4 mlp >check.txt 2>&1 || fail "colour: $(cat check.txt)"
finish
