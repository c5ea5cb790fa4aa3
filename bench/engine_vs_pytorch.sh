#!/bin/sh
# Training throughput of Stoke's engine beside PyTorch's, one run, same
# models (bench/torch_models.py), batch, thread count and SGD step; then the
# engine's matmul against oneDNN's sgemm at 1024^3.
#
#   bench/engine_vs_pytorch.sh [BUILD_DIR] [SECONDS_PER_MODEL] [cpu|cuda]
#
# MODELS="resnet50 mobilenet_v2" picks the models (default: mlp cnn resnet8
# resnet18); BATCH=32 SIZE=64 the batch and input side (default: 128, and
# each model's own: 28 px for mlp/cnn/resnet8, 32 px for the others). With the current-PyTorch venv (bench/make-torch-venv.sh, or
# STOKE_TORCH_VENV) PyTorch 2.x runs too, beside Debian's.
#
# With cuda both run on the GPU (PyTorch needs a CUDA build of torch).
#
# Then, where --amp runs (a GPU, or a CPU with bf16 instructions: `stoke
# devices`), both again with mixed precision: Stoke's --amp beside PyTorch's
# autocast (bf16 on the CPU, f16 with a GradScaler on a GPU), PyTorch 2.x
# when the venv is there, else Debian's; with --flops PyTorch's line gives
# the FLOPs of a step per image and the GFLOP/s they make. AMP=0 skips it.
#
# PyTorch from Debian calls whichever libblas.so.3 the alternatives system
# points to: the reference BLAS (about 6 GFLOP/s here) unless OpenBLAS is
# installed. Install libopenblas0-pthread for PyTorch's best case; the line
# "pytorch BLAS:" says which one was used.
set -eu
BUILD=${1:-build}
SECONDS_PER=${2:-20}
DEVICE=${3:-cpu}
PY=${PYTHON3:-/usr/bin/python3}
MODELS=${MODELS:-mlp cnn resnet8 resnet18}
HERE=$(dirname "$0")
VENV=${STOKE_TORCH_VENV:-$HERE/../.venv-torch}
AMP=${AMP:-1}
SHAPE="--batch ${BATCH:-128}${SIZE:+ --size $SIZE}"
if [ "$DEVICE" = cpu ] && ! "$BUILD/stoke" devices | grep -q "bf16 on "; then
    [ "$AMP" = 1 ] && echo "(--amp: this CPU has no bf16 instructions, so f32 only)"
    AMP=0
fi
PYAMP=$PY
[ -x "$VENV/bin/python" ] && PYAMP=$VENV/bin/python
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p')
echo "pytorch BLAS: ${blas:-unknown}"
for m in $MODELS; do
    s=$("$BUILD/bench_train" --models "$m" $SHAPE --seconds "$SECONDS_PER" --no-matmul --device "$DEVICE")
    p=$("$PY" "$HERE/pytorch_models.py" --models "$m" $SHAPE --seconds "$SECONDS_PER" --device "$DEVICE")
    echo "$s"
    echo "$p"
    si=$(echo "$s" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
    pi=$(echo "$p" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
    awk -v m="$m" -v a="$si" -v b="$pi" 'BEGIN { printf "ratio   %-9s stoke/pytorch: %.2fx\n", m, a / b }'
    if [ -x "$VENV/bin/python" ]; then
        p2=$("$VENV/bin/python" "$HERE/pytorch_models.py" --models "$m" $SHAPE --seconds "$SECONDS_PER" --device "$DEVICE")
        echo "$p2"
        pi2=$(echo "$p2" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
        awk -v m="$m" -v a="$si" -v b="$pi2" 'BEGIN { printf "ratio   %-9s stoke/pytorch 2.x: %.2fx\n", m, a / b }'
    fi
    if [ "$AMP" = 1 ]; then
        s=$("$BUILD/bench_train" --models "$m" $SHAPE --seconds "$SECONDS_PER" --no-matmul --device "$DEVICE" --amp)
        p=$("$PYAMP" "$HERE/pytorch_models.py" --models "$m" $SHAPE --seconds "$SECONDS_PER" --device "$DEVICE" --amp --flops)
        echo "$s"
        echo "$p"
        si=$(echo "$s" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
        pi=$(echo "$p" | sed 's/.*: *\([0-9.]*\) images.*/\1/')
        fl=$(echo "$p" | sed -n 's/.*, \([0-9.]*\) MFLOP\/image.*/\1/p')
        awk -v m="$m" -v a="$si" -v b="$pi" -v f="${fl:-0}" 'BEGIN {
            printf "ratio   %-9s stoke --amp/pytorch autocast: %.2fx", m, a / b
            if (f > 0) printf " (stoke %.1f GFLOP/s)", a * f / 1000
            printf "\n" }'
    fi
done
if [ "$DEVICE" = cpu ]; then
    "$BUILD/bench_train" --models mlp --seconds 8 | tail -1
fi
