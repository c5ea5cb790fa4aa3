#!/bin/sh
# Training throughput of Stoke's engine beside PyTorch's, one run, same
# models (bench/torch_models.py), batch, thread count and SGD step; then the
# engine's matmul against oneDNN's sgemm at 1024^3.
#
#   bench/engine_vs_pytorch.sh [BUILD_DIR] [SECONDS_PER_MODEL] [cpu|cuda]
#
# With cuda both run on the GPU (PyTorch needs a CUDA build of torch).
#
# PyTorch from Debian calls whichever libblas.so.3 the alternatives system
# points to: the reference BLAS (about 6 GFLOP/s here) unless OpenBLAS is
# installed. Install libopenblas0-pthread for PyTorch's best case; the line
# "pytorch BLAS:" says which one was used.
set -eu
BUILD=${1:-build}
SECONDS_PER=${2:-20}
DEVICE=${3:-cpu}
PY=/usr/bin/python3
MODELS="mlp cnn resnet8 resnet18"
HERE=$(dirname "$0")
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p')
echo "pytorch BLAS: ${blas:-unknown}"
for m in $MODELS; do
    s=$("$BUILD/bench_train" --models "$m" --seconds "$SECONDS_PER" --no-matmul --device "$DEVICE")
    p=$("$PY" "$HERE/pytorch_models.py" --models "$m" --seconds "$SECONDS_PER" --device "$DEVICE")
    echo "$s"
    echo "$p"
    si=$(echo "$s" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
    pi=$(echo "$p" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
    awk -v m="$m" -v a="$si" -v b="$pi" 'BEGIN { printf "ratio   %-9s stoke/pytorch: %.2fx\n", m, a / b }'
done
if [ "$DEVICE" = cpu ]; then
    "$BUILD/bench_train" --models mlp --seconds 8 | tail -1
fi
