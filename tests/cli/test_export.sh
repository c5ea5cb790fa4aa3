#!/bin/sh
# stoke export --format safetensors: a trained checkpoint's weights alone
# (no optimizer state, "format": "pt", num_batches_tracked as I64) with the
# class names `stoke pack --classes` stored and training copied, the
# normalisation, the source's SHA-256; refused onto the checkpoint itself;
# a checkpoint with a missing or mismatched tensor, or not a checkpoint, is
# a clear error. With safetensors and torchvision in the test venv: a
# resnet18 at 64 px loads into torchvision's own resnet18 strictly and gives
# Stoke's logits within 1e-4 (tests/python/check_export_weights.py).
. "$STOKE_TESTS/cli/lib.sh"
cp "$STOKE_TESTS/../data/fashion-mnist-classes.txt" names.txt
run 0 "$STOKE" pack --from idx --classes names.txt "$STOKE_FIXTURES/idx" tiny.stoke
run 0 "$STOKE" train --data tiny.stoke --val tiny.stoke --model cnn --batch 8 --epochs 1 --workers 2 \
    --no-tensorboard --out run
run 0 "$STOKE" export run/best.safetensors
expect out.txt "run/best.weights.safetensors: cnn safetensors (10 classes, 28 px)"
run 0 "$STOKE" export run/best.safetensors --format safetensors --out w.safetensors --json
expect out.txt '"out": "w.safetensors", "format": "safetensors"'
sha=$(sha256sum run/best.safetensors | cut -d' ' -f1)
expect out.txt "\"source_sha256\": \"$sha\""
"$PYTHON3" - "$STOKE_TESTS" "$sha" <<'PY' || fail "the weights file"
import json, sys
sys.path.insert(0, sys.argv[1] + "/python")
import st_io
w, meta = st_io.load("w.safetensors")
ck, ck_meta = st_io.load("run/best.safetensors")
assert meta["format"] == "pt" and "format_version" not in meta, meta
assert meta["source_sha256"] == sys.argv[2], meta
names = [l.strip() for l in open("names.txt")]
assert json.loads(meta["class_names"]) == names, meta["class_names"]
assert json.loads(ck_meta["class_names"]) == names, "training did not keep the class names"
for k in ("model", "classes", "image_size", "in_channels", "input_mean", "input_std", "val_transform"):
    assert meta[k] == ck_meta[k], (k, meta[k], ck_meta[k])
model = {k: v for k, v in ck.items() if not k.startswith("optim.")}
assert len(model) < len(ck), "the checkpoint had no optimizer state to leave out"
assert sorted(w) == sorted(model), (sorted(w), sorted(model))
for k in w:
    assert w[k].dtype == model[k].dtype and (w[k] == model[k]).all(), k
assert any(k.endswith("num_batches_tracked") and str(w[k].dtype) == "int64" for k in w)
# the same checkpoint without a tensor, and with one of another shape
del ck["conv1.weight"]
st_io.save("missing.safetensors", ck, ck_meta)
ck, _ = st_io.load("run/best.safetensors")
ck["fc.bias"] = ck["fc.bias"][:-1]
st_io.save("mismatched.safetensors", ck, ck_meta)
PY
run 2 "$STOKE" export run/best.safetensors --out run/best.safetensors
expect err.txt "is the checkpoint itself"
run 1 "$STOKE" export missing.safetensors
expect err.txt "conv1.weight"
run 1 "$STOKE" export mismatched.safetensors
expect err.txt "fc.bias"
run 1 "$STOKE" export tiny.stoke
expect err.txt "tiny.stoke"
run 1 "$STOKE" export w.safetensors
expect err.txt "w.safetensors"
run 1 "$STOKE" export nowhere.safetensors
expect err.txt "nowhere.safetensors"
run 2 "$STOKE" export run/best.safetensors --format onnx
expect err.txt "--format"
[ -e run/best.weights.safetensors ] || fail "the default --out was not written"
# torchvision's own resnet18 takes the weights of a resnet18 trained at 64 px
VPY=${STOKE_VENV_PYTHON:-}
if [ -n "$VPY" ] && "$VPY" -c "import safetensors, torch, torchvision" 2>/dev/null; then
    run 0 "$EXPORT_RESNET18" "$WORK" 64
    run 0 "$STOKE" export resnet18.safetensors --out r18.safetensors
    run 0 "$VPY" "$STOKE_TESTS/python/check_export_weights.py" r18.safetensors io.safetensors
    cat out.txt
    expect out.txt "loaded strictly"
else
    echo "no safetensors/torchvision in the test venv (scripts/make-venv.sh): the torchvision check skipped"
fi
finish
