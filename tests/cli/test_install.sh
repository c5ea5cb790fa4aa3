#!/bin/sh
# cmake --install into a fresh prefix: bin/stoke, lib/libstoke.so (only stk_
# names exported), the public headers under include/stoke/, stoke.pc; then a
# program out of the tree (examples/train_minimal.c) built with pkg-config
# against the prefix alone, and run.
. "$STOKE_TESTS/cli/lib.sh"
: "${BUILD:?}" "${CC:?}"
P="$WORK/prefix"
run 0 cmake --install "$BUILD" --prefix "$P"
for f in bin/stoke lib/libstoke.so include/stoke/train/fit.h include/stoke/common/status.h \
         lib/pkgconfig/stoke.pc; do
    [ -e "$P/$f" ] || fail "not installed: $f"
done
# the reference the flag tables make: a man page per command, bash and zsh completion
for f in share/man/man1/stoke.1 share/man/man1/stoke-train.1 share/man/man1/stoke-lr-find.1 \
         share/bash-completion/completions/stoke share/zsh/site-functions/_stoke; do
    [ -s "$P/$f" ] || fail "not installed: $f"
done
[ "$(ls "$P"/share/man/man1 | wc -l)" = "$(($("$BUILD/stoke" help --commands | wc -l) + 1))" ] ||
    fail "not one man page per command (and stoke.1)"
ls "$P"/include/stoke/*/*_impl.h 2>/dev/null && fail "private headers installed"
[ -e "$P/include/stoke/kernels/cuda" ] && fail "the CUDA backend's headers installed"
nm -D --defined-only "$P/lib/libstoke.so" | awk '{print $3}' | grep -v '^stk_' > names.txt
[ -s names.txt ] && { fail "exported names without the stk_ prefix:"; head names.txt >&2; }
run 0 "$P/bin/stoke" --version
# no CUDA library is linked: the backend is a module, loaded on first use
readelf -d "$P/bin/stoke" "$P/lib/libstoke.so" | grep NEEDED | grep -E 'libcu|libnccl' &&
    fail "the binary or the library links a CUDA library"
if [ -e "$BUILD/libstoke_cuda.so" ]; then
    [ -e "$P/lib/stoke/libstoke_cuda.so" ] || fail "not installed: lib/stoke/libstoke_cuda.so"
    nm -D --defined-only "$P/lib/stoke/libstoke_cuda.so" | awk '{print $3}' > mod.txt
    [ "$(cat mod.txt)" = stk_cuda_module_open ] || fail "the module exports more: $(cat mod.txt)"
    # the prefix moves: the binary still finds its module (a relative RUNPATH)
    mv "$P" "$WORK/moved"
    P="$WORK/moved"
    run 0 "$P/bin/stoke" devices
    expect out.txt "loaded from $P/bin/../lib/stoke/libstoke_cuda.so"
fi
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
flags=$(pkg-config --cflags --libs stoke) || fail "pkg-config stoke"
cp "$STOKE_TESTS/../examples/train_minimal.c" .
run 0 "$CC" -O1 -o train_minimal train_minimal.c $flags
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
LD_LIBRARY_PATH="$P/lib" run 0 ./train_minimal tiny.stoke tiny.stoke 2
expect out.txt "epoch 2: train loss"
expect out.txt "best epoch"
finish
