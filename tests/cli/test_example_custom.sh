#!/bin/sh
# examples/custom_model.c: a VGG-style model with squeeze-excitation, built
# with the module API, trains through stk_trainer_fit (its run folder made
# for it); its checkpoints describe it (model_graph), so stoke info, eval,
# predict and export work on them without the program, and a damaged
# description is refused naming the line. The ONNX file is checked by
# onnx.checker and onnxruntime where the test venv has them.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
run 0 "$CUSTOM_MODEL" tiny.stoke tiny.stoke runs/vgg 1
expect out.txt "vgg_se: val top-1 "
[ -s runs/vgg/best.safetensors ] || fail "no best.safetensors in the run folder it made"
run 0 "$STOKE" info runs/vgg/best.safetensors
expect out.txt "vgg_se"
run 0 "$STOKE" eval --checkpoint runs/vgg/best.safetensors --data tiny.stoke
expect out.txt "top-1"
run 0 "$STOKE" predict runs/vgg/best.safetensors "tiny.stoke#0" "tiny.stoke#1"
expect out.txt "tiny.stoke#1"
run 0 "$STOKE" export runs/vgg/best.safetensors --out vgg.onnx
[ -s vgg.onnx ] || fail "vgg.onnx not written"
run 0 "$STOKE" export runs/vgg/best.safetensors --format safetensors --out vgg.weights.safetensors
# the description is checked: a damaged one is refused, naming the line
"$PYTHON3" - runs/vgg/best.safetensors bad.safetensors <<'PY' || fail "could not write bad.safetensors"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
head["__metadata__"]["model_graph"] = head["__metadata__"]["model_graph"].replace(
    "conv2d conv1 1 32", "conv2d conv1 1 -32")
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
run 1 "$STOKE" info bad.safetensors
expect err.txt "model_graph line"
run 2 "$CUSTOM_MODEL"
VPY=${STOKE_VENV_PYTHON:-}
if [ -n "$VPY" ] && "$VPY" -c "import onnx, onnxruntime, safetensors" 2>/dev/null; then
    run 0 "$FORWARD_IO" runs/vgg/best.safetensors vgg-io.safetensors
    run 0 "$VPY" "$STOKE_TESTS/python/check_onnx.py" vgg.onnx vgg-io.safetensors
    expect out.txt "all within 1e-4"
fi
finish
