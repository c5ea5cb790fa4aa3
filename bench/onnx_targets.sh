#!/bin/sh
# Issue 50's targets for models imported from ONNX, in one run on one machine:
#
# 1. Training throughput, f32, 2 threads, 64 px RGB, batch 32: resnet18 and
#    efficientnet_b0 (bench/torch_models.py, torchvision's) exported by
#    torch.onnx.export in training mode (PyTorch 2.x from the venv of
#    bench/make-torch-venv.sh) and trained by Stoke (bench_train), beside
#    the same architecture built in and PyTorch eager (bench/pytorch_models.py).
# 2. Accuracy (ACC=1): a module of the user's own (FashionNet of
#    tests/fixtures/make_onnx_fixtures.py) exported once; Stoke trains the
#    ONNX file, PyTorch the module from the same initial weights, on the
#    60,000 Fashion-MNIST training images, 5 epochs, AdamW lr 1e-3 weight
#    decay 0.05, batch 64, cosine per step to 0, no augmentation, the
#    training set's mean/std; top-1 on the 10,000 test images. SEEDS
#    (default "0"): one run per seed (shuffling) and framework.
#
#   bench/onnx_targets.sh [BUILD_DIR] [SECONDS_PER_MODEL]
set -eu
BUILD=${1:-build}
SECS=${2:-15}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${STOKE_TORCH_VENV:-$HERE/../.venv-torch}
PY=$VENV/bin/python
"$PY" -c 'import torch, onnx; print("peer: torch", torch.__version__)'
lscpu | sed -n 's/^Model name: *//p'
W=$(mktemp -d)
"$PY" - "$W" "$HERE" <<'PYX'
import os, sys, warnings
warnings.filterwarnings("ignore")
out, here = sys.argv[1], sys.argv[2]
sys.path[:0] = [here, os.path.join(here, "..", "tests", "fixtures")]
import torch, torch_models
from make_onnx_fixtures import FashionNet, export_training, save_safetensors
for name in ("resnet18", "efficientnet_b0"):
    torch.manual_seed(1)
    export_training(torch_models.make(name, 3, 10, 64), torch.randn(2, 3, 64, 64),
                    os.path.join(out, name + ".onnx"))
torch.manual_seed(0)
net = FashionNet()
save_safetensors(os.path.join(out, "fashion_state.safetensors"), net.state_dict())
export_training(net, torch.randn(2, 1, 28, 28), os.path.join(out, "fashion_net.onnx"))
PYX
rate() { sed 's/.*: *\([0-9.]*\) images.*/\1/'; }
# imported and built in alternately, twice, the better of each kept (the
# first run after the export's Python ran up to 10% slow: caches, clocks)
best() { # best LINE LINE: the line of the higher rate
    if [ "$(echo "$1" | rate | cut -d. -f1)" -ge "$(echo "$2" | rate | cut -d. -f1)" ]; then
        echo "$1"
    else
        echo "$2"
    fi
}
for m in resnet18 efficientnet_b0; do
    i=$("$BUILD/bench_train" --models "$W/$m.onnx" --size 64 --batch 32 --threads 2 --seconds "$SECS" --no-matmul)
    b=$("$BUILD/bench_train" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" --no-matmul)
    i2=$("$BUILD/bench_train" --models "$W/$m.onnx" --size 64 --batch 32 --threads 2 --seconds "$SECS" --no-matmul)
    b2=$("$BUILD/bench_train" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" --no-matmul)
    p=$("$PY" "$HERE/pytorch_models.py" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" 2>/dev/null)
    echo "$i"
    echo "$b"
    echo "$i2"
    echo "$b2"
    echo "$p"
    i=$(best "$i" "$i2")
    b=$(best "$b" "$b2")
    awk -v m="$m" -v i="$(echo "$i" | rate)" -v b="$(echo "$b" | rate)" -v p="$(echo "$p" | rate)" \
        'BEGIN { printf "ratio   %-16s imported/built-in %.2fx, imported/pytorch %.2fx\n", m, i / b, i / p }'
done
[ "${ACC:-0}" = 1 ] || exit 0
SRC=/usr/share/datasets/fashion-mnist
"$BUILD/stoke" pack --from idx --split train "$SRC" "$W/train.stoke" >/dev/null
"$BUILD/stoke" pack --from idx --split test "$SRC" "$W/test.stoke" >/dev/null
top1() { sed -n 's/.*"val_top1": *\([0-9.]*\).*/\1/p'; }
for seed in ${SEEDS:-0}; do
    s=$("$BUILD/stoke" train --data "$W/train.stoke" --val "$W/test.stoke" --model "$W/fashion_net.onnx" \
        --epochs 5 --batch 64 --optimizer adamw --lr 1e-3 --wd 0.05 --schedule cosine \
        --transform center:28 --threads 2 --seed "$seed" --no-tensorboard --json --out "$W/run-$seed" \
        2>/dev/null | tail -1)
    p=$("$PY" "$HERE/pytorch_train.py" --model fashion_net --state "$W/fashion_state.safetensors" \
        --epochs 5 --batch 64 --optimizer adamw --lr 1e-3 --wd 0.05 --seed "$seed" --json 2>/dev/null)
    echo "seed $seed stoke (fashion_net.onnx): $s"
    echo "seed $seed pytorch (FashionNet):     $p"
    awk -v a="$(echo "$s" | top1)" -v b="$(echo "$p" | top1)" \
        'BEGIN { printf "accuracy seed '"$seed"': stoke %.2f%%, pytorch %.2f%%, difference %+.2f\n", a, b, a - b }'
done
rm -rf "$W"
