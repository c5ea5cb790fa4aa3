#!/bin/sh
# The Fashion-MNIST targets of `stoke train`, beside the same recipes in
# PyTorch (bench/pytorch_train.py), in one run: 5 epochs, batch 128, 2 threads.
#   mlp:     SGD momentum 0.9, lr 0.1 (constant), no augmentation
#   cnn:     SGD Nesterov 0.9, lr 0.05 cosine per step to 0, wd 5e-4, pad:2,crop:28,flip
#   resnet8: the same as cnn
# Where --amp runs on this CPU (bf16 instructions: `stoke devices`), resnet8
# again with --amp, and its test top-1 beside the f32 run's (ONLY=amp runs
# just those two; SEED=N gives both --seed N). Then a JPEG run: resnet18 (ImageNet stem) with rrc:64,flip on a set made by
# ../shared/data/make-jpeg-set.sh, when JPEG_SET (a packed .stoke) is given.
#
#   bench/train_targets.sh [BUILD_DIR] [DATA_DIR]
set -eu
BUILD=${1:-build}
DATA=${2:-demo-data}
PY=/usr/bin/python3
HERE=$(dirname "$0")
STOKE="$BUILD/stoke"
[ -f "$DATA/fmnist-train.stoke" ] || "$STOKE" pack --from idx --split train /usr/share/datasets/fashion-mnist "$DATA/fmnist-train.stoke" >/dev/null
[ -f "$DATA/fmnist-test.stoke" ] || "$STOKE" pack --from idx --split test /usr/share/datasets/fashion-mnist "$DATA/fmnist-test.stoke" >/dev/null
COMMON="--data $DATA/fmnist-train.stoke --val $DATA/fmnist-test.stoke --epochs 5 --batch 128 --threads 2 --json"
run() {
    name=$1
    shift
    echo "== $name =="
    "$STOKE" train $COMMON --out "$DATA/run-$name" --overwrite "$@" 2>"$DATA/run-$name.log" | tee "$DATA/stoke-$name.json"
}
RESNET8="--model resnet8 --nesterov --lr 0.05 --wd 5e-4 --transform pad:2,crop:28,flip"
if [ "${ONLY:-}" = amp ]; then
    run resnet8 $RESNET8 ${SEED:+--seed $SEED}
    run resnet8-amp $RESNET8 --amp ${SEED:+--seed $SEED}
    "$PY" - "$DATA" <<'PY'
import json, sys
f = json.loads(open(sys.argv[1] + "/stoke-resnet8.json").read().splitlines()[-1])
a = json.loads(open(sys.argv[1] + "/stoke-resnet8-amp.json").read().splitlines()[-1])
print("resnet8 test top-1: f32 %.2f%%, --amp %.2f%% (%+.2f points); training images/s %s, %s"
      % (f["val_top1"], a["val_top1"], a["val_top1"] - f["val_top1"],
         f["train_images_per_sec"], a["train_images_per_sec"]))
PY
    exit 0
fi
run mlp --model mlp --optimizer sgd --momentum 0.9 --lr 0.1 --wd 0 --schedule constant --transform center:28
"$PY" "$HERE/pytorch_train.py" --model mlp --epochs 5 --lr 0.1 --schedule constant --json
run cnn --model cnn --nesterov --lr 0.05 --wd 5e-4 --transform pad:2,crop:28,flip
"$PY" "$HERE/pytorch_train.py" --model cnn --epochs 5 --lr 0.05 --nesterov --wd 5e-4 --pad 2 --json
run resnet8 $RESNET8
"$PY" "$HERE/pytorch_train.py" --model resnet8 --epochs 5 --lr 0.05 --nesterov --wd 5e-4 --pad 2 --json
if "$STOKE" devices | grep -q "bf16 on "; then
    run resnet8-amp $RESNET8 --amp
fi
if [ -n "${JPEG_SET:-}" ]; then
    echo "== resnet18 on $JPEG_SET (rrc:64,flip) =="
    "$STOKE" train --data "$JPEG_SET" --model resnet18 --epochs 1 --batch 64 --transform rrc:64,flip \
        --out "$DATA/run-resnet18-jpeg" --overwrite --json
fi
