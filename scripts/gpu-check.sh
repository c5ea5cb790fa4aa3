#!/bin/sh
# On a machine with an NVIDIA GPU: what the GPU-less CI cannot check.
#
#   scripts/gpu-check.sh [BUILD_DIR]
#
# 1. builds with CUDA (STOKE_CUDA=ON: fails if nvcc, cuBLAS or cuDNN is missing);
# 2. runs the GPU op tests (every CUDA op against the CPU backend) and the
#    CUDA training CLI test on the real GPU;
# 3. runs the op tests and a short training run under compute-sanitizer
#    (memcheck, racecheck, synccheck): out-of-bounds and misaligned device
#    accesses, shared-memory races, invalid synchronisation;
# 4. with 2 GPUs and mpirun: data-parallel training with NCCL against one process;
# 5. measures training throughput on the GPU beside PyTorch (when a CUDA
#    build of torch is installed for /usr/bin/python3).
# Prints each step's result and exits non-zero if any check failed.
set -u
BUILD=${1:-build-gpu}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
SAN="$CUDA/bin/compute-sanitizer"
failed=0
step() { echo; echo "== $* =="; }
check() { if "$@"; then echo "ok: $*"; else echo "FAILED: $*"; failed=1; fi; }

step "build with CUDA"
cmake -S "$HERE" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_CUDA=ON >/dev/null || exit 1
cmake --build "$BUILD" -j "$(nproc)" >/dev/null || exit 1
"$BUILD/stoke" devices
"$BUILD/stoke" devices | grep -q '^gpu [0-9]' || { echo "no GPU visible: nothing to check"; exit 1; }

step "GPU op tests and CUDA training on the real GPU"
(cd "$BUILD" && check ctest --output-on-failure -R 'test_cuda_backend|cli_train_cuda|test_cuda_kernels')

step "compute-sanitizer"
if [ -x "$SAN" ]; then
    for tool in memcheck racecheck synccheck; do
        check "$SAN" --tool "$tool" --error-exitcode 9 "$BUILD/tests/test_cuda_backend"
    done
    W=$(mktemp -d)
    # the fixtures the ctest run above generated
    "$BUILD/stoke" pack --from idx "$BUILD/tests/fixtures/idx" "$W/tiny.stoke" >/dev/null
    check "$SAN" --tool memcheck --error-exitcode 9 "$BUILD/stoke" train --data "$W/tiny.stoke" \
        --val "$W/tiny.stoke" --model resnet8 --epochs 1 --batch 8 --device cuda --out "$W/run"
    rm -rf "$W"
else
    echo "FAILED: $SAN not found"
    failed=1
fi

step "data-parallel on GPUs with NCCL (needs 2 GPUs and mpirun)"
if [ "$("$BUILD/stoke" devices | grep -c '^gpu [0-9]')" -ge 2 ] && command -v mpirun >/dev/null; then
    (cd "$BUILD" && check ctest --output-on-failure -R 'cli_train_mpi')
else
    echo "(skipped: NCCL needs one GPU per rank)"
fi

step "Python: stoke.Loader(device='cuda') batches into torch (DLPack, CUDA)"
if /usr/bin/python3 -c 'import torch, pytest, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    (cd "$BUILD" && check ctest --output-on-failure -V -R 'python_device')
else
    echo "(skipped: no CUDA torch and pytest for /usr/bin/python3)"
fi

step "throughput on the GPU beside PyTorch"
if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    sh "$HERE/bench/engine_vs_pytorch.sh" "$BUILD" 10 cuda
else
    echo "(PyTorch with CUDA not installed: Stoke alone)"
    "$BUILD/bench_train" --device cuda --seconds 10 --no-matmul
fi

echo
[ "$failed" = 0 ] && echo "gpu-check: all passed" || echo "gpu-check: FAILURES above"
exit "$failed"
