#!/bin/sh
# A pack that fails or is killed part way leaves nothing at OUT, and a failed
# one leaves no temporary either. Faults are injected with strace (no hooks in
# the code): ENOSPC/EIO on the Nth write, fsync, rename or a source read;
# SIGKILL and SIGINT at chosen system calls.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
command -v strace >/dev/null || { echo "strace missing: skipped"; exit 77; }
strace -f -o /dev/null true 2>/dev/null || { echo "ptrace not permitted here: skipped"; exit 77; }
# LeakSanitizer cannot run under ptrace; the other sanitizers still do.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# fault SPEC EXPECTED_TEXT: pack under strace with SPEC; must fail, leave o/ empty.
fault() {
    rm -rf o && mkdir o
    strace -f -o /dev/null "$@" "$STOKE" pack "$FX/good" o/x.stoke >out.txt 2>err.txt
    rc=$?
    want=1
    case "$*" in *signal=INT*) want=130 ;; esac   # Ctrl-C: 128 + SIGINT, as shells expect
    [ "$rc" = $want ] || fail "exit $rc (wanted $want) with $*"
    only_entries o 0
}
# LMDB commits with pwrite/writev; compaction writes with write on its own thread.
fault -e inject=pwrite64:error=ENOSPC:when=1
expect err.txt "No space left on device"
fault -e inject=pwrite64:error=ENOSPC:when=3
expect err.txt "No space left on device"
fault -e inject=writev:error=ENOSPC:when=1
expect err.txt "writing records: No space left on device"
fault -e inject=write:error=ENOSPC:when=1
expect err.txt "compacting: No space left on device"
fault -e inject=pwrite64:error=EIO:when=2
expect err.txt "Input/output error"
fault -e inject=fsync:error=EIO:when=1
expect err.txt "cannot sync: Input/output error"
fault -e inject=rename:error=EIO
expect err.txt "cannot rename into place: Input/output error"
# A source file that cannot be read is named, with errno text.
fault -P "$FX/good/cat/cat_3.jpg" -e trace=read -e inject=read:error=EIO
expect err.txt "cat/cat_3.jpg: read failed at offset 0: Input/output error"
# An unreadable file (EACCES even for root, who could otherwise read anything).
fault -P "$FX/good/dog/dog_0.jpg" -e trace=openat -e inject=openat:error=EACCES
expect err.txt "dog/dog_0.jpg: cannot open: Permission denied"
# Ctrl-C while reading the images.
fault -P "$FX/good/cat/cat_2.jpg" -e trace=read -e inject=read:signal=INT
expect err.txt "pack interrupted; o/x.stoke was not written"

# kill -9 mid-write and just before the rename: nothing at OUT ...
for spec in pwrite64:signal=KILL:when=2 rename:signal=KILL; do
    rm -rf o && mkdir o
    strace -f -o /dev/null -e inject=$spec "$STOKE" pack "$FX/good" o/x.stoke >/dev/null 2>&1
    [ -e o/x.stoke ] && fail "a killed pack ($spec) left o/x.stoke"
    ls -A o | grep -q '^\.x\.stoke\.pack-' || fail "expected the killed pack's temporary ($spec)"
    # ... and the next pack to the same OUT removes the temporary.
    run 0 "$STOKE" pack "$FX/good" o/x.stoke
    only_entries o 1
done
finish
