#!/bin/sh
# On a machine with an NVIDIA GPU: what the GPU-less CI cannot check.
#
#   scripts/gpu-check.sh [BUILD_DIR]
#
# 1. builds with CUDA (STOKE_CUDA=ON: fails if nvcc, cuBLAS or cuDNN is
#    missing), unless BUILD_DIR is a folder made by scripts/gpu-carry.sh (a
#    build made elsewhere with the libraries it needs, for a machine that
#    cannot build Stoke: its cuBLAS, cuDNN and NCCL are looked for here);
# 2. runs the GPU op tests (every CUDA op against the CPU backend), the H2D
#    copy engine's tests and the CUDA training CLI test on the real GPU;
# 3. runs the op tests and a short training run under compute-sanitizer
#    (memcheck, racecheck, synccheck): out-of-bounds and misaligned device
#    accesses, shared-memory races, invalid synchronisation;
# 4. with 2 GPUs and mpirun: data-parallel training with NCCL against one process;
# 5. measures training throughput on the GPU beside PyTorch (when a CUDA
#    build of torch is installed for PYTHON3, default /usr/bin/python3, else
#    python3). MODELS and BENCH_SECONDS pick the models and seconds per model.
# Prints each step's result and exits non-zero if any check failed.
set -u
BUILD=${1:-build-gpu}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
SAN="$CUDA/bin/compute-sanitizer"
command -v compute-sanitizer >/dev/null && [ ! -x "$SAN" ] && SAN=$(command -v compute-sanitizer)
PY=${PYTHON3:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
LIMIT=${STEP_TIMEOUT:-300} # seconds per step, so one hang cannot take the whole lease
failed=0
step() { echo; echo "== $* =="; }
check() { if "$@"; then echo "ok: $*"; else echo "FAILED ($?): $*"; failed=1; fi; }

if [ -f "$BUILD/CMakeCache.txt" ] || [ ! -f "$BUILD/stoke" ]; then
    step "build with CUDA"
    cmake -S "$HERE" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_CUDA=ON >/dev/null || exit 1
    cmake --build "$BUILD" -j "$(nproc)" >/dev/null || exit 1
    [ -d "$BUILD/tests/fixtures/idx" ] || "$PY" "$HERE/tests/fixtures/make_fixtures.py" "$BUILD/tests/fixtures" || exit 1
else
    step "carried build ($BUILD, from scripts/gpu-carry.sh)"
    # its own libraries, then the folders of this machine's CUDA libraries
    # (the toolkit's, or the nvidia-* wheels' of a PyTorch install)
    LIBS="$(cd "$BUILD" && pwd)/lib:$(cd "$BUILD" && pwd)"
    for so in libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
        d=$(find "$CUDA/" /usr/local /opt /usr/lib -name "$so" 2>/dev/null | head -1)
        [ -n "$d" ] && LIBS="$LIBS:$(dirname "$d")" || echo "warning: $so not found"
    done
    export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    ldd "$BUILD/libstoke_cuda.so" | grep 'not found'
fi
BUILD=$(cd "$BUILD" && pwd)
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$BUILD/stoke" devices
"$BUILD/stoke" devices | grep -q '^gpu [0-9]' || { echo "no GPU visible: nothing to check"; exit 1; }
W=$(mktemp -d)
T="$BUILD/tests"
unit() { (cd "$T" && STOKE_TEST_TMP="$W" CK_DEFAULT_TIMEOUT=120 timeout "$LIMIT" "$@"); }
cli() {
    timeout "$LIMIT" env STOKE="$BUILD/stoke" STOKE_FIXTURES="$T/fixtures" STOKE_TESTS="$HERE/tests" PYTHON3="$PY" \
        STOKE_PROGRESS=plain WORK="$W/work_$1" sh "$HERE/tests/cli/test_$1.sh"
}

step "GPU op tests, the H2D stage and CUDA training on the real GPU"
check unit ./test_cuda_backend
check unit ./test_h2d
check unit env STOKE_CUDA_MODULE_FILE="$BUILD/libstoke_cuda.so" ./test_cuda_module
check cli train_cuda

step "compute-sanitizer"
if [ -x "$SAN" ]; then
    for tool in memcheck racecheck synccheck; do
        check timeout "$LIMIT" "$SAN" --tool "$tool" --error-exitcode 9 "$T/test_cuda_backend"
    done
    "$BUILD/stoke" pack --from idx "$T/fixtures/idx" "$W/tiny.stoke" >/dev/null
    check timeout "$LIMIT" "$SAN" --tool memcheck --error-exitcode 9 "$BUILD/stoke" train --data "$W/tiny.stoke" \
        --val "$W/tiny.stoke" --model resnet8 --epochs 1 --batch 8 --device cuda --out "$W/run"
else
    echo "FAILED: compute-sanitizer not found"
    failed=1
fi

step "data-parallel on GPUs with NCCL (needs 2 GPUs and mpirun)"
if [ "$("$BUILD/stoke" devices | grep -c '^gpu [0-9]')" -ge 2 ] && command -v mpirun >/dev/null; then
    check cli train_mpi
else
    echo "(skipped: NCCL needs one GPU per rank)"
fi

step "Python: stoke.Loader(device='cuda') batches into torch (DLPack, CUDA)"
if [ -d "$BUILD/python/stoke" ] && "$PY" -c 'import torch, pytest, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    check timeout "$LIMIT" env PYTHONPATH="$BUILD/python" STOKE="$BUILD/stoke" STOKE_FIXTURES="$T/fixtures" \
        "$PY" -m pytest -q -p no:cacheprovider "$HERE/tests/python/test_device_python.py"
else
    echo "(skipped: no Python module, or no CUDA torch and pytest for $PY)"
fi

step "throughput on the GPU beside PyTorch"
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    PYTHON3="$PY" timeout "$LIMIT" sh "$HERE/bench/engine_vs_pytorch.sh" "$BUILD" "${BENCH_SECONDS:-10}" cuda
else
    echo "(PyTorch with CUDA not installed: Stoke alone)"
    timeout "$LIMIT" "$BUILD/bench_train" --device cuda --seconds "${BENCH_SECONDS:-10}" --no-matmul
fi
rm -rf "$W"

echo
[ "$failed" = 0 ] && echo "gpu-check: all passed" || echo "gpu-check: FAILURES above"
exit "$failed"
