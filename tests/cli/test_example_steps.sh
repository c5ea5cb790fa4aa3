#!/bin/sh
# examples/train_steps.c (the trainer one step at a time, a gradient hook)
# and examples/engine_steps.c (the engine's step written out) train on a
# packed set and write checkpoints that stoke reads; docs/library.md shows
# parts of both (tests/docs/run_docs.py checks they are these files' lines).
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 images: 3 batches of 16
mkdir run
run 0 "$TRAIN_STEPS" tiny.stoke cpu 2 run
expect out.txt "epoch 1: 3 steps by hand"
expect out.txt "epoch 2: 3 steps, loss "
# the hook heard every parameter's gradient of every step
params=$(sed -n 's/.*gradients heard (\([0-9]*\) parameters).*/\1/p' out.txt)
[ -n "$params" ] && [ "$params" -gt 0 ] || fail "no parameter count: $(cat out.txt)"
expect out.txt "$((3 * ${params:-0})) gradients heard"
run 0 "$STOKE" info run/last.safetensors
expect out.txt "cnn: 1 channel, 28 px, 10 classes"
run 0 "$ENGINE_STEPS" tiny.stoke 9 e.safetensors
expect out.txt "step 8: loss "
"$PYTHON3" - <<'PY' || fail "the engine's loss did not fall: $(cat out.txt)"
import re
loss = [float(x) for x in re.findall(r"^step \d+: loss ([0-9.]+)", open("out.txt").read(), re.M)]
assert len(loss) == 2 and loss[1] < loss[0], loss
PY
run 0 "$STOKE" info e.safetensors
expect out.txt "resnet8: 1 channel, 28 px, 10 classes"
run 1 "$TRAIN_STEPS" missing.stoke
expect err.txt "train_steps: missing.stoke"
run 1 "$ENGINE_STEPS" tiny.stoke 2 no/such/dir/e.safetensors
expect err.txt "engine_steps: "
run 2 "$TRAIN_STEPS"
run 2 "$ENGINE_STEPS"
finish
