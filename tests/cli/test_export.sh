#!/bin/sh
# stoke export --format onnx: every zoo model, both input kinds, folded or
# not, opset 17 or 13, checked by onnx.checker (full_check) and run by
# onnxruntime on batch 1 and 3 against Stoke's logits within 1e-4
# (tests/python/check_onnx.py; onnx and onnxruntime in the test venv).
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
run 0 "$STOKE" export run/best.safetensors --format safetensors
expect out.txt "run/best.weights.safetensors: cnn safetensors (10 classes, 28 px)"
run 0 "$STOKE" export run/best.safetensors --format safetensors --out w.safetensors --json
expect out.txt '"out": "w.safetensors", "format": "safetensors"'
sha=$(sha256sum run/best.safetensors | cut -d' ' -f1)
expect out.txt "\"source_sha256\": \"$sha\""
# an --out that is a symbolic link or a device is written through, never
# replaced by a file (as root, /dev/null itself would have been)
ln -s w.safetensors link.safetensors
run 0 "$STOKE" export run/best.safetensors --format safetensors --out link.safetensors
[ -L link.safetensors ] || fail "export replaced the symbolic link --out with a file"
cmp -s w.safetensors link.safetensors || fail "export did not write the link's target"
ln -s /dev/null null.onnx
run 0 "$STOKE" export run/best.safetensors --out null.onnx
[ -L null.onnx ] && [ -c /dev/null ] || fail "export replaced a link to /dev/null"
if mknod node c 1 3 2>/dev/null; then
    run 0 "$STOKE" export run/best.safetensors --out node
    [ -c node ] || fail "export --out onto a character device made it a regular file"
fi
mkdir adir
run 1 "$STOKE" export run/best.safetensors --out adir
expect err.txt "adir: will not write over it: a directory"
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
run 2 "$STOKE" export run/best.safetensors --format pickle
expect err.txt "--format"
run 2 "$STOKE" export run/best.safetensors --opset 15
expect err.txt "--opset 15: 17 (the default) or 13"
run 1 "$STOKE" export missing.safetensors --format onnx
expect err.txt "conv1.weight"
[ -e missing.onnx ] && fail "a failed export wrote missing.onnx"
# ONNX: the default format, NAME.onnx beside the checkpoint
run 0 "$STOKE" export run/best.safetensors
expect out.txt "run/best.onnx: cnn onnx (10 classes, 28 px)"
[ -s run/best.onnx ] || fail "run/best.onnx not written"
[ -e run/best.weights.safetensors ] || fail "the default --out was not written"
VPY=${STOKE_VENV_PYTHON:-}
if [ -n "$VPY" ] && "$VPY" -c "import onnx, onnxruntime, safetensors" 2>/dev/null; then
    pairs=""
    # the torchvision models: not under ThreadSanitizer (its one thread
    # makes their training minutes long; the other builds check them)
    models="mlp cnn resnet8 resnet18"
    # (today's architectures: all in the release build; under ASan the two
    # that hold every new ONNX node kind between them: attention, layer norm,
    # squeeze-excitation, Hardswish/HardSigmoid)
    case "${STOKE_SANITIZE:-}" in
    *thread*) ;;
    "") models="$models resnet50 mobilenet_v2 efficientnet_b0 mobilenet_v3_small convnext_tiny"
        models="$models regnet_y_400mf vit_tiny" ;;
    *) models="$models resnet50 mobilenet_v2 mobilenet_v3_small vit_tiny" ;;
    esac
    for m in $models; do
        run 0 "$STOKE" train --data tiny.stoke --model $m --batch 25 --epochs 1 --workers 2 \
            --no-tensorboard --out "t-$m"
        run 0 "$FORWARD_IO" "t-$m/last.safetensors" "$m-io.safetensors"
        run 0 "$STOKE" export "t-$m/last.safetensors" --out "$m.onnx"
        run 0 "$STOKE" export "t-$m/last.safetensors" --input u8-nhwc --out "$m-u8.onnx"
        pairs="$pairs $m.onnx $m-io.safetensors $m-u8.onnx $m-io.safetensors"
    done
    run 0 "$STOKE" export t-resnet8/last.safetensors --no-fold --opset 13 --out r8-bn.onnx
    if [ -d t-vit_tiny ]; then # LayerNormalization is opset 17's: 13 is refused, named
        run 1 "$STOKE" export t-vit_tiny/last.safetensors --opset 13 --out vit13.onnx
        expect err.txt "needs --opset 17"
    fi
    # torchvision's stem (7x7 stride 2, max pool) at 64 px, and large logits
    mkdir -p r18-64
    run 0 "$EXPORT_RESNET18" "$WORK/r18-64" 64
    run 0 "$STOKE" export r18-64/resnet18.safetensors --out r18-64.onnx
    run 0 "$STOKE" export r18-64/resnet18.safetensors --no-fold --out r18-64-bn.onnx
    run 0 "$FORWARD_IO" r18-64/resnet18.safetensors r18-64-io.safetensors
    # three channels: the JPEG fixtures
    run 0 "$STOKE" pack --from imagefolder "$STOKE_FIXTURES/good" rgb.stoke
    run 0 "$STOKE" train --data rgb.stoke --model cnn --batch 4 --epochs 1 --workers 2 \
        --transform rrc:32,flip --no-tensorboard --out t-rgb
    run 0 "$FORWARD_IO" t-rgb/last.safetensors rgb-io.safetensors
    run 0 "$STOKE" export t-rgb/last.safetensors --input u8-nhwc --out rgb-u8.onnx
    # shellcheck disable=SC2086
    run 0 "$VPY" "$STOKE_TESTS/python/check_onnx.py" $pairs r8-bn.onnx resnet8-io.safetensors \
        rgb-u8.onnx rgb-io.safetensors r18-64.onnx r18-64-io.safetensors r18-64-bn.onnx \
        r18-64-io.safetensors
    cat out.txt
    expect out.txt "all within 1e-4"
    "$VPY" - <<'PY' || fail "ONNX names and metadata"
import json, onnx
m = onnx.load("resnet18.onnx")
names = [n.name for n in m.graph.node]
assert "/layer1/layer1.0/conv1/Conv" in names and "/layer1/layer1.0/relu_1/Relu" in names, names
assert "/fc/Gemm" in names and not any(n.op_type == "BatchNormalization" for n in m.graph.node)
import os
if os.path.exists("mobilenet_v2.onnx"):  # ReLU6 as torch exports it; depthwise convs; classifier.1
    mb = onnx.load("mobilenet_v2.onnx")
    assert sum(n.op_type == "Clip" for n in mb.graph.node) == 35, [n.op_type for n in mb.graph.node]
    assert any(a.name == "group" and a.i == 96 for n in mb.graph.node for a in n.attribute)
    assert mb.graph.node[-1].op_type == "Gemm" and mb.graph.node[-1].output[0] == "logits"
assert "layer1.0.conv1.weight" in [i.name for i in m.graph.initializer]
bn = onnx.load("r8-bn.onnx")
assert any(n.op_type == "BatchNormalization" for n in bn.graph.node)
meta = {p.key: p.value for p in m.metadata_props}
for k in ("input_mean", "input_std", "val_transform"):
    assert k in meta, (k, meta)
names = [l.strip() for l in open("names.txt")]
assert json.loads(meta["class_names"]) == names, meta
u8 = onnx.load("resnet18-u8.onnx")
assert [n.op_type for n in u8.graph.node[:4]] == ["Cast", "Sub", "Div", "Transpose"]
assert u8.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
PY
else
    echo "no onnx/onnxruntime in the test venv (scripts/make-venv.sh): the ONNX checks skipped"
fi
# torchvision's own resnet18 takes the weights of a resnet18 trained at 64 px
if [ -n "$VPY" ] && "$VPY" -c "import safetensors, torch, torchvision" 2>/dev/null; then
    run 0 "$EXPORT_RESNET18" "$WORK" 64
    run 0 "$STOKE" export resnet18.safetensors --format safetensors --out r18.safetensors
    run 0 "$VPY" "$STOKE_TESTS/python/check_export_weights.py" r18.safetensors io.safetensors
    cat out.txt
    expect out.txt "loaded strictly"
else
    echo "no safetensors/torchvision in the test venv (scripts/make-venv.sh): the torchvision check skipped"
fi
finish
