#!/bin/sh
# Issue 49's targets for today's architectures, in one run on one machine:
#
# 1. Training throughput, f32, 2 threads, 64 px RGB, batch 32: bench_train
#    beside bench/pytorch_models.py (torchvision's models, PyTorch 2.x from
#    the venv of bench/make-torch-venv.sh) for efficientnet_b0,
#    mobilenet_v3_small, convnext_tiny and vit_tiny; where the CPU has bf16
#    (`stoke devices`), both again with --amp / autocast.
# 2. Accuracy (ACC=1): efficientnet_b0 and convnext_tiny trained by both on
#    the same Fashion-MNIST training images (the first TRAIN_N, default
#    4000, of the 60,000: two CPU cores train ~50 images/s at 28 px), 5
#    epochs, evaluated on the 10,000 test images: AdamW lr 1e-3, weight
#    decay 0.05, batch 64, cosine per step to 0, no augmentation, the
#    training set's mean/std, torchvision's dropout and stochastic depth.
#    SEEDS (default "0"): one run per seed and framework (initialisation,
#    shuffling, dropout and stochastic depth), then each framework's mean
#    and range: with 4,000 images one seed's spread is a few points.
#    ACC_MODELS (default both) limits the comparison to some of them.
#
#   bench/modern_targets.sh [BUILD_DIR] [SECONDS_PER_MODEL]
set -eu
BUILD=${1:-build}
SECS=${2:-15}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${STOKE_TORCH_VENV:-$HERE/../.venv-torch}
PY=/usr/bin/python3
[ -x "$VENV/bin/python" ] && PY=$VENV/bin/python
"$PY" -c 'import torch; print("peer: torch", torch.__version__)'
lscpu | sed -n 's/^Model name: *//p'
for m in efficientnet_b0 mobilenet_v3_small convnext_tiny vit_tiny; do
    s=$("$BUILD/bench_train" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" --no-matmul)
    p=$("$PY" "$HERE/pytorch_models.py" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" 2>/dev/null)
    echo "$s"
    echo "$p"
    si=$(echo "$s" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
    pi=$(echo "$p" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
    awk -v m="$m" -v a="$si" -v b="$pi" 'BEGIN { printf "ratio   %-18s stoke/pytorch f32: %.2fx\n", m, a / b }'
    if "$BUILD/stoke" devices | grep -q "bf16 on "; then
        s=$("$BUILD/bench_train" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" --no-matmul --amp)
        p=$("$PY" "$HERE/pytorch_models.py" --models $m --size 64 --batch 32 --threads 2 --seconds "$SECS" --amp 2>/dev/null)
        echo "$s"
        echo "$p"
        si=$(echo "$s" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
        pi=$(echo "$p" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
        awk -v m="$m" -v a="$si" -v b="$pi" 'BEGIN { printf "ratio   %-18s stoke --amp/pytorch autocast bf16: %.2fx\n", m, a / b }'
    fi
done
[ "${ACC:-0}" = 1 ] || exit 0
N=${TRAIN_N:-4000}
W=$(mktemp -d)
"$PY" - "$W" "$N" <<'PYX'
import gzip, shutil, sys
src, out, n = "/usr/share/datasets/fashion-mnist/", sys.argv[1] + "/", int(sys.argv[2])
for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
    data = gzip.open(src + name).read()
    ndim = data[3]
    per = 1
    for i in range(1, ndim):
        per *= int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
    head = bytearray(data[:4 + 4 * ndim])
    head[4:8] = n.to_bytes(4, "big")
    gzip.open(out + name, "wb").write(bytes(head) + data[4 + 4 * ndim:4 + 4 * ndim + n * per])
for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
    shutil.copy(src + name, out + name)
PYX
"$BUILD/stoke" pack --from idx --split train "$W" "$W/train.stoke" >/dev/null
"$BUILD/stoke" pack --from idx --split test "$W" "$W/test.stoke" >/dev/null
top1() { sed -n 's/.*"val_top1": *\([0-9.]*\).*/\1/p'; }
for m in ${ACC_MODELS:-efficientnet_b0 convnext_tiny}; do
    s_all="" p_all=""
    for seed in ${SEEDS:-0}; do
        s=$("$BUILD/stoke" train --data "$W/train.stoke" --val "$W/test.stoke" --model $m --epochs 5 \
            --batch 64 --optimizer adamw --lr 1e-3 --wd 0.05 --schedule cosine --transform center:28 \
            --threads 2 --seed "$seed" --no-tensorboard --json --out "$W/run-$m-$seed" 2>/dev/null | tail -1)
        p=$("$PY" "$HERE/pytorch_train.py" --data-dir "$W" --model $m --epochs 5 --batch 64 \
            --optimizer adamw --lr 1e-3 --wd 0.05 --seed "$seed" --json 2>/dev/null)
        echo "seed $seed stoke:   $s"
        echo "seed $seed pytorch: $p"
        s_all="$s_all $(echo "$s" | top1)" p_all="$p_all $(echo "$p" | top1)"
    done
    echo "$s_all|$p_all" | awk -F'|' -v m="$m" '
        function stats(list, who,   v, k, i, sum, lo, hi) {
            k = split(list, v, " "); sum = 0; lo = 101; hi = -1
            for (i = 1; i <= k; i++) { sum += v[i]; if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
            printf "%s %-16s top-1 mean %.2f%% over %d seeds (%.2f..%.2f)\n", who, m, sum / k, k, lo, hi
            return sum / k
        }
        { a = stats($1, "stoke  "); b = stats($2, "pytorch"); printf "accuracy %-16s stoke - pytorch: %+.2f points\n", m, a - b }'
done
rm -rf "$W"
