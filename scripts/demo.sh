#!/bin/sh
# The main job on the embedded default: Debian's Fashion-MNIST (dataset-fashion-mnist),
# packed into two Stoke datasets, inspected, verified, benchmarked, and a
# resnet8 trained on it for 3 epochs on the CPU (about 2 minutes on 2 cores).
#   scripts/demo.sh path/to/stoke
set -eu
STOKE=${1:-build/stoke}
SRC=/usr/share/datasets/fashion-mnist
OUT=demo-data
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"

echo "== pack Fashion-MNIST (train and test) =="
"$STOKE" pack --from idx --split train --classes "$HERE/data/fashion-mnist-classes.txt" \
    "$SRC" "$OUT/fmnist-train.stoke"
"$STOKE" pack --from idx --split test --classes "$HERE/data/fashion-mnist-classes.txt" \
    "$SRC" "$OUT/fmnist-test.stoke"
echo
echo "== info =="
"$STOKE" info "$OUT/fmnist-train.stoke"
echo
echo "== verify =="
"$STOKE" verify "$OUT/fmnist-train.stoke"
"$STOKE" verify "$OUT/fmnist-test.stoke"
echo
echo "== bench: the loader on the training set (one epoch, the training transform) =="
"$STOKE" bench --epochs 1 "$OUT/fmnist-train.stoke"
echo
echo "== peek: 16 training samples as the model will see them =="
"$STOKE" peek --count 16 --out "$OUT/peek-train.pgm" "$OUT/fmnist-train.stoke" | head -4
echo "..."
echo
echo "== train: resnet8, 3 epochs on the CPU, evaluated on the test set =="
# --overwrite: a second `make demo` replaces the first one's run (event files included)
"$STOKE" train --data "$OUT/fmnist-train.stoke" --val "$OUT/fmnist-test.stoke" --model resnet8 \
    --epochs 3 --batch 128 --nesterov --lr 0.05 --wd 5e-4 --transform pad:2,crop:28,flip \
    --out "$OUT/run-resnet8" --overwrite
echo
echo "== plot: the run's curves (or: tensorboard --logdir $OUT/run-resnet8) =="
"$STOKE" plot "$OUT/run-resnet8" --out "$OUT/run-resnet8/curves.svg"
echo
echo "== eval: the best checkpoint =="
"$STOKE" eval --data "$OUT/fmnist-test.stoke" --checkpoint "$OUT/run-resnet8/best.safetensors"
