#!/bin/sh
# Packs what scripts/gpu-check.sh runs into one folder, for a GPU machine that
# cannot build Stoke itself (no Debian packages, no registry: the lent
# machines of the device tool).
#
#   scripts/gpu-carry.sh [BUILD_DIR] [OUT_DIR]     (defaults: build build-carried)
#
# BUILD_DIR is a CUDA build made here (STOKE_CUDA=ON or AUTO with nvcc). OUT_DIR
# mirrors its layout (stoke, libstoke_cuda.so, bench_train, tests/test_*,
# tests/fixtures, python/stoke) plus lib/: every shared library `ldd` shows
# they need except glibc's and CUDA's own (cuBLAS, cuDNN, NCCL: the GPU
# machine has those; gpu-check.sh finds them there). About 55 MB, mostly
# oneDNN (the device tool carries 64 MiB with the working tree). Then, on the GPU machine, from the repository root:
#
#   sh scripts/gpu-check.sh build-carried
set -eu
BUILD=${1:-build}
OUT=${2:-build-carried}
HERE=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$BUILD/libstoke_cuda.so" ] || { echo "$BUILD has no libstoke_cuda.so: not a CUDA build" >&2; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target stoke stoke_cuda bench_train test_cuda_backend \
    test_h2d test_cuda_module >/dev/null
[ -d "$BUILD/tests/fixtures/idx" ] || /usr/bin/python3 "$HERE/tests/fixtures/make_fixtures.py" "$BUILD/tests/fixtures"
rm -rf "$OUT"
mkdir -p "$OUT/tests" "$OUT/lib" "$OUT/python"
FILES="stoke libstoke_cuda.so bench_train tests/test_cuda_backend tests/test_h2d tests/test_cuda_module"
for f in $FILES; do cp "$BUILD/$f" "$OUT/$f"; done
strip --strip-debug "$OUT/stoke" "$OUT/bench_train" "$OUT/libstoke_cuda.so" "$OUT"/tests/test_*
cp -r "$BUILD/tests/fixtures" "$OUT/tests/"
if [ -d "$BUILD/python/stoke" ]; then cp -r "$BUILD/python/stoke" "$OUT/python/"
    strip --strip-debug "$OUT/python/stoke/_stoke.abi3.so"
    FILES="$FILES python/stoke/_stoke.abi3.so"; fi
# the libraries they load, glibc's and CUDA's left out
for f in $FILES; do ldd "$OUT/$f"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
    while read -r name path; do
        case $name in
        libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
        libcu* | libnccl* | libnv*) ;;
        *) cp -L "$path" "$OUT/lib/$name" ;;
        esac
    done
echo "$OUT: $(du -sh "$OUT" | cut -f1) ($(ls "$OUT/lib" | wc -l) libraries in lib/)"
