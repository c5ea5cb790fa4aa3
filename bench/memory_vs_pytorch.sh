#!/bin/sh
# Peak resident memory of one training process beside PyTorch 2.x's, one
# run: Stoke's engine (bench_train) and PyTorch (bench/pytorch_models.py in
# the current-PyTorch venv, bench/make-torch-venv.sh) training the same
# model on random inputs, same batch, size, f32, thread count; each under
# /usr/bin/time. Also Stoke's caching allocator's peak (what the tensors
# needed), so RSS / peak shows what the process holds beyond it.
#
#   bench/memory_vs_pytorch.sh [BUILD_DIR] [MODEL=resnet18] [SIZE=224] [BATCH=64] [THREADS=2]
set -eu
BUILD=${1:-build}
MODEL=${2:-resnet18}
SIZE=${3:-224}
BATCH=${4:-64}
THREADS=${5:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${STOKE_TORCH_VENV:-$HERE/../.venv-torch}
[ -x "$VENV/bin/python" ] || { echo "no PyTorch 2.x venv at $VENV: run bench/make-torch-venv.sh" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
/usr/bin/time -f %M -o "$OUT/stoke.rss" "$BUILD/bench_train" --models "$MODEL" --size "$SIZE" \
    --channels 3 --batch "$BATCH" --threads "$THREADS" --seconds 10 --no-matmul >"$OUT/stoke.txt"
/usr/bin/time -f %M -o "$OUT/torch.rss" "$VENV/bin/python" "$HERE/pytorch_models.py" \
    --models "$MODEL" --size "$SIZE" --channels 3 --batch "$BATCH" --threads "$THREADS" \
    --seconds 10 >"$OUT/torch.txt"
cat "$OUT/stoke.txt" "$OUT/torch.txt"
s=$(cat "$OUT/stoke.rss")
p=$(cat "$OUT/torch.rss")
peak=$(sed -n 's/.*peak \([0-9.]*\) MiB.*/\1/p' "$OUT/stoke.txt")
awk -v s="$s" -v p="$p" -v peak="$peak" -v m="$MODEL" -v sz="$SIZE" -v b="$BATCH" 'BEGIN {
    printf "peak RSS, %s %d px batch %d: stoke %.0f MB (allocator peak %.0f MB: RSS %.2fx of it), pytorch %.0f MB; stoke/pytorch %.2fx\n",
        m, sz, b, s / 1000 * 1.024, peak * 1.048576, (s * 1024) / (peak * 1048576), p / 1000 * 1.024, s / p }'
