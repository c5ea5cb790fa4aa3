#!/bin/sh
# stoke train --model FILE.onnx end to end: a module of the user's own
# (FashionNet in tests/fixtures/make_onnx_fixtures.py, exported by
# torch.onnx.export in training mode) trains on Fashion-MNIST. Its
# checkpoints keep the graph: with the file gone, info, eval, predict,
# export --format safetensors, --resume and --init work from them alone;
# lr-find and tune take the file as train does.
# The exported weights load into the PyTorch module with
# load_state_dict(strict=True) and give Stoke's eval-mode logits within
# 1e-4 (Debian's python3-torch). Refused, naming the file and the reason: a
# graph of another input size, batch norm folded by an eval-mode export,
# --drop-path, a file that is not ONNX, a missing file. Its ONNX export
# (eval mode, batch norm folded or not, u8 input) runs in onnxruntime to
# Stoke's logits within 1e-4 (the test venv's onnxruntime).
. "$STOKE_TESTS/cli/lib.sh"
: "${FORWARD_IO:?}"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
cp "$STOKE_TESTS/data/onnx/fmnist_net.onnx" net.onnx
run 0 "$STOKE" train --data tiny.stoke --val tiny.stoke --model net.onnx --batch 8 --epochs 1 \
    --workers 2 --no-tensorboard --out run
expect out.txt "top-1"
mv net.onnx kept.onnx
run 0 "$STOKE" info run/best.safetensors
expect out.txt "model    onnx: 1 channel, 28 px, 10 classes; 20538 parameters"
expect out.txt "graph    from ONNX, kept in the checkpoint"
run 0 "$STOKE" eval --checkpoint run/best.safetensors --data tiny.stoke
expect out.txt "top-1"
"$STOKE" peek tiny.stoke --index 0 --out one.png >/dev/null 2>&1 ||
    "$PYTHON3" -c 'import zlib,struct
raw=b"".join(b"\0"+bytes(28) for _ in range(28))
c=lambda t,d: struct.pack(">I",len(d))+t+d+struct.pack(">I",zlib.crc32(t+d))
open("one.png","wb").write(b"\x89PNG\r\n\x1a\n"+c(b"IHDR",struct.pack(">IIBBBBB",28,28,8,0,0,0,0))+c(b"IDAT",zlib.compress(raw))+c(b"IEND",b""))'
run 0 "$STOKE" predict run/best.safetensors one.png
expect out.txt "one.png"
# --resume continues from the checkpoint's graph (the file is gone)
run 0 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --epochs 2 --workers 2 \
    --no-tensorboard --out run --resume
expect out.txt "epoch 2/2"
run 0 "$STOKE" export run/last.safetensors --format safetensors --out w.safetensors
expect out.txt "w.safetensors: onnx safetensors (10 classes, 28 px), 14 tensors"
# ONNX for inference: the file's graph in eval mode with the trained weights
run 0 "$STOKE" export run/last.safetensors --out m.onnx
expect out.txt "m.onnx: onnx onnx (10 classes, 28 px)"
run 0 "$STOKE" export run/last.safetensors --no-fold --out m-bn.onnx
run 0 "$STOKE" export run/last.safetensors --input u8-nhwc --out m-u8.onnx
run 2 "$STOKE" export run/last.safetensors --opset 13 --out m13.onnx
expect err.txt "a model imported from ONNX is written in its file's opset (17)"
[ -e m13.onnx ] && fail "a refused export wrote m13.onnx"
# the weights go back into the PyTorch module, strictly, and compute Stoke's logits
run 0 "$FORWARD_IO" run/last.safetensors io.safetensors 4
"$PYTHON3" - "$STOKE_TESTS" <<'PY' || fail "the weights in PyTorch"
import sys
import torch
sys.path.insert(0, sys.argv[1] + "/python")
sys.path.insert(0, sys.argv[1] + "/fixtures")
import st_io
from make_onnx_fixtures import FashionNet
w, meta = st_io.load("w.safetensors")
assert meta["model"] == "onnx" and meta["format"] == "pt", meta
m = FashionNet()
m.load_state_dict({k: torch.tensor(v) for k, v in w.items()}, strict=True)
assert int(m.bn1.num_batches_tracked) > 0, "num_batches_tracked did not count"
m.eval()
io, _ = st_io.load("io.safetensors")
with torch.no_grad():
    y = m(torch.tensor(io["input"]))
diff = float((y - torch.tensor(io["logits"])).abs().max())
print(f"PyTorch module from Stoke's weights vs Stoke: max |logit difference| {diff:.2e}")
assert diff <= 1e-4 * max(1.0, float(y.abs().max())), diff
PY
# ... which onnxruntime runs to Stoke's logits (the test venv's onnx checker first)
VPY=${STOKE_VENV_PYTHON:-}
if [ -n "$VPY" ] && "$VPY" -c "import onnx, onnxruntime, safetensors" 2>/dev/null; then
    run 0 "$VPY" "$STOKE_TESTS/python/check_onnx.py" m.onnx io.safetensors m-bn.onnx \
        io.safetensors m-u8.onnx io.safetensors
    expect out.txt "all within 1e-4"
    "$VPY" - <<'PY' || fail "the exported graph's nodes"
import onnx
ops = [n.op_type for n in onnx.load("m.onnx").graph.node]
assert "BatchNormalization" not in ops and "Dropout" not in ops, ops
bn = onnx.load("m-bn.onnx").graph.node
assert all(len(n.output) == 1 for n in bn if n.op_type == "BatchNormalization"), bn
PY
else
    echo "no onnx/onnxruntime in the test venv (scripts/make-venv.sh): the ONNX checks skipped"
fi
# --init from the checkpoint, into the same graph
cp kept.onnx net.onnx
run 0 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --epochs 1 --workers 2 \
    --no-tensorboard --out run2 --init run/last.safetensors
expect err.txt "loaded"
# lr-find and tune take the file as train does
run 0 "$STOKE" lr-find --data tiny.stoke --model net.onnx --batch 8 --workers 2 --out lr.svg
expect out.txt "suggested learning rate"
run 0 "$STOKE" tune --data tiny.stoke --model net.onnx --space "lr=loguniform(1e-3,1e-1)" \
    --samples 2 --epochs 1 --batch 8 --workers 2 --no-tensorboard --out tune
expect out.txt "COMPLETED"
# --freeze by the state dict's names, an EMA of the weights, clipping
run 0 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --epochs 1 --workers 2 \
    --no-tensorboard --out run-fz --freeze conv1 --freeze bn1 --ema-decay 0.99 --clip-grad-norm 1
expect out.txt "parameters: 20,538 (20,362 trainable, 176 frozen)"
expect out.txt "conv1      144 frozen"
run 0 "$STOKE" export run-fz/last.safetensors --ema --out ema.onnx
# micro-batches run the graph per micro-batch; pipeline stages split it
# into its units (cut where one tensor alone flows on, named after the
# modules) and train as the one-stage run does
run 0 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --micro-batches 2 --epochs 1 \
    --workers 2 --no-tensorboard --out run3
run 0 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --micro-batches 2 --pipeline 2 \
    --split-after bn1 --epochs 1 --workers 2 --no-tensorboard --out run-pipe
expect out.txt "stage 0: conv1 .. bn1 (2 units), stage 1: conv2 .. fc (3 units)"
cut -d, -f1-4 run3/metrics.csv > losses-one.csv
cut -d, -f1-4 run-pipe/metrics.csv > losses-pipe.csv
cmp losses-one.csv losses-pipe.csv || fail "--pipeline 2 trained otherwise than one stage"
run 1 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --micro-batches 2 --pipeline 2 \
    --split-after conv9 --epochs 1 --no-tensorboard --out bad0
expect err.txt "--split-after conv9 (the onnx units: conv1 bn1 conv2 bn2 fc)"
# on an emulated (or real) GPU: the graph's constants go with its weights;
# its checkpoint exports on the CPU
if "$STOKE" devices | grep -q '^gpu [0-9]'; then
    run 0 "$STOKE" train --data tiny.stoke --model net.onnx --batch 8 --epochs 1 --workers 2 \
        --no-tensorboard --out run-gpu --device cuda
    expect out.txt "cuda memory"
    run 0 "$STOKE" export run-gpu/last.safetensors --out gpu.onnx
fi
# refusals
run 1 "$STOKE" train --data tiny.stoke --model "$STOKE_TESTS/data/onnx/tiny_train.onnx" \
    --epochs 1 --no-tensorboard --out bad1
expect err.txt "tiny_train.onnx: its graph is declared for input channels 3, not 1"
run 1 "$STOKE" train --data tiny.stoke --model "$STOKE_TESTS/data/onnx/tiny_eval.onnx" \
    --epochs 1 --no-tensorboard --out bad2
expect err.txt "its batch norm is folded into the convolutions"
expect err.txt "training=torch.onnx.TrainingMode.TRAINING"
run 1 "$STOKE" train --data tiny.stoke --model net.onnx --drop-path 0.1 --epochs 1 \
    --no-tensorboard --out bad3
expect err.txt "its stochastic depth is the module's own"
printf 'not onnx' > fake.onnx
run 1 "$STOKE" train --data tiny.stoke --model fake.onnx --epochs 1 --no-tensorboard --out bad4
expect err.txt "fake.onnx"
run 1 "$STOKE" train --data tiny.stoke --model missing.onnx --epochs 1 --no-tensorboard --out bad5
expect err.txt "missing.onnx"
finish
