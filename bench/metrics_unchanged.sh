#!/bin/sh
# Training numerics unchanged by a refactor: the same flags with two builds
# of stoke give the same metrics.csv loss and accuracy columns, bit for bit
# (epoch, step, lr, train_loss, train_acc, val_loss, val_top1, val_top5;
# the timing and memory columns differ by nature).
#
#   bench/metrics_unchanged.sh OLD_STOKE NEW_STOKE [WORKDIR]
#
# e.g. OLD_STOKE built from the commit before the change:
#   git worktree add /tmp/old <rev> && cmake -S /tmp/old -B /tmp/old/build && \
#   cmake --build /tmp/old/build --target stoke
# Data: Fashion-MNIST from Debian's dataset-fashion-mnist (the test split, to
# keep it short), validated on itself.
set -eu
OLD=$1 NEW=$2 W=${3:-metrics-unchanged}
FM=/usr/share/datasets/fashion-mnist
mkdir -p "$W"
[ -f "$W/fm-test.stoke" ] || "$NEW" pack --from idx --split test "$FM" "$W/fm-test.stoke" >/dev/null
fails=0
for recipe in "mlp --epochs 2 --transform center:28" \
              "cnn --epochs 2 --transform pad:2,crop:28,flip" \
              "resnet8 --epochs 1 --optimizer adamw --schedule onecycle --label-smoothing 0.1"; do
    rm -rf "$W/old" "$W/new"
    set -- --data "$W/fm-test.stoke" --val "$W/fm-test.stoke" --batch 128 --no-tensorboard --model
    "$OLD" train "$@" $recipe --out "$W/old" >/dev/null 2>&1
    "$NEW" train "$@" $recipe --out "$W/new" >/dev/null 2>&1
    cut -d, -f1-8 "$W/old/metrics.csv" >"$W/a.csv"
    cut -d, -f1-8 "$W/new/metrics.csv" >"$W/b.csv"
    if cmp -s "$W/a.csv" "$W/b.csv"; then
        echo "identical: $recipe ($(($(wc -l <"$W/b.csv") - 1)) epochs)"
    else
        echo "DIFFERENT: $recipe"; diff "$W/a.csv" "$W/b.csv" || true
        fails=$((fails + 1))
    fi
done
exit $fails
