#!/bin/sh
# The pixel ops' throughput targets, one run, same machine:
#   bench/pixel_ops_targets.sh BUILD_DIR DATA.stoke [WORKERS=2] [ROUNDS=3]
# For rrc:224,flip with and without colorjitter / trivialaugment /
# randaugment: `stoke bench` (2 epochs, no checksum, as a training run; the
# median of ROUNDS runs, the transforms taking turns, since this machine is
# shared and one run can land on a busy moment) and PyTorch's DataLoader with
# the same torchvision transforms on PIL images (bench/pytorch_loader.py,
# 2048 images, one run). Prints images/s and the ratios.
set -eu
B=$1
DATA=$2
W=${3:-2}
ROUNDS=${4:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
TRANSFORMS="rrc:224,flip rrc:224,flip,colorjitter:0.4:0.4:0.4:0.1 rrc:224,flip,trivialaugment rrc:224,flip,randaugment"
field() { $PY -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
RUNS=$(mktemp)
trap 'rm -f "$RUNS"' EXIT
for r in $(seq "$ROUNDS"); do
    for t in $TRANSFORMS; do
        s=$(field "$("$B/stoke" bench --workers "$W" --epochs 2 --no-checksum --json --transform "$t" "$DATA" 2>/dev/null)" images_per_sec)
        echo "$t $s" >>"$RUNS"
    done
done
median() { grep "^$1 " "$RUNS" | cut -d' ' -f2 | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
base=$(median rrc:224,flip)
for t in $TRANSFORMS; do
    s=$(median "$t")
    all=$(grep "^$t " "$RUNS" | cut -d' ' -f2 | xargs printf '%.0f ')
    p=$(field "$($PY "$HERE/pytorch_loader.py" "$DATA" --workers "$W" --images 2048 --transform "$t")" images_per_sec)
    $PY -c "print(f'$t: stoke {float($s):.0f} images/s (median of: $all; {float($s) / float($base):.2f}x rrc:224,flip), PyTorch DataLoader {float($p):.0f} ({float($s) / float($p):.1f}x)')"
done
