#!/bin/sh
# stoke bench end to end: JSON, determinism across workers and I/O backends,
# io_uring fallbacks (seccomp-like EPERM, a non-root user with a low memlock
# limit), read-only and cold runs, usage errors.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
run 0 "$STOKE" pack "$FX/good" good.stoke

checksum() { "$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$1"; }

run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --json good.stoke
cp out.txt ref.json
"$PYTHON3" - <<'PY' || fail "bench --json lacks keys or counts"
import json
d = json.load(open("ref.json"))
for k in ("images", "seconds", "images_per_sec", "mb_per_sec", "stall_pct", "peak_rss_mb", "read_s",
          "decode_s", "augment_s", "wait_s", "bad_records", "checksum", "workers", "batch", "io",
          "transform"):
    assert k in d, k
assert d["images"] == 11 and d["bad_records"] == 0 and d["transform"] == "rrc:32,flip", d
PY
REF=$(checksum ref.json)
for w in 1 2 4; do
    for io in uring pread mmap; do
        run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --workers $w --io $io --json good.stoke
        [ "$(checksum out.txt)" = "$REF" ] || fail "checksum differs with --workers $w --io $io"
    done
done
# The same images packed without restart markers (the whole-stream decode):
# the segment decode of the default pack gives the same pixels.
run 0 "$STOKE" pack --restart 0 "$FX/good" plain.stoke
cmp -s plain.stoke good.stoke && fail "--restart 0 wrote the same file"
for w in 1 2; do
    run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --workers $w --json plain.stoke
    [ "$(checksum out.txt)" = "$REF" ] || fail "checksum differs without restart markers (--workers $w)"
done
run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --direct --json good.stoke
[ "$(checksum out.txt)" = "$REF" ] || fail "checksum differs with --direct"
# Float output (normalised CHW): runs, deterministic, other bytes than u8.
run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip,norm:imagenet --dtype f32 --json good.stoke
F32=$(checksum out.txt)
[ "$F32" = "$REF" ] && fail "f32 output hashed like u8"
run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip,norm:imagenet --dtype f32 --workers 1 --io pread --json good.stoke
[ "$(checksum out.txt)" = "$F32" ] || fail "f32 checksum differs across workers/backends"
# Another seed: other crops.
run 0 "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --seed 9 --json good.stoke
[ "$(checksum out.txt)" = "$REF" ] && fail "--seed changed nothing"

# io_uring refused (as a container's seccomp profile does): one notice, same batches.
if command -v strace >/dev/null && strace -f -o /dev/null true 2>/dev/null; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # LSan cannot run under ptrace
    strace -f -o /dev/null -e inject=io_uring_setup:error=EPERM \
        "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --json good.stoke >out.txt 2>err.txt \
        || fail "bench failed when io_uring is refused"
    expect err.txt "io_uring cannot be set up: Operation not permitted; reading with pread instead"
    [ "$(grep -c 'io_uring cannot' err.txt)" = 1 ] || fail "the fallback notice should be one line"
    [ "$(checksum out.txt)" = "$REF" ] || fail "checksum differs after the fallback"
    expect out.txt '"io": "pread"'
    # ... and on a kernel without io_uring (ENOSYS).
    strace -f -o /dev/null -e inject=io_uring_setup:error=ENOSYS \
        "$STOKE" bench --batch 4 --epochs 1 --transform rrc:32,flip --json good.stoke >out.txt 2>err.txt \
        || fail "bench failed without io_uring"
    expect err.txt "io_uring cannot be set up: Function not implemented; reading with pread instead"
    [ "$(checksum out.txt)" = "$REF" ] || fail "checksum differs without io_uring"
fi
# A non-root user with a small memlock limit: the ring is not locked (a
# warning) and io_uring's buffers are not registered; the batches are the same.
chmod 755 . && chmod 644 good.stoke
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "cat good.stoke >/dev/null && '$STOKE' --version" >/dev/null 2>&1; then
    setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
        "ulimit -l 64 && '$STOKE' bench --batch 4 --epochs 1 --transform rrc:32,flip --prefetch 64 --json good.stoke" \
        >out.txt 2>err.txt || fail "bench failed as a non-root user with ulimit -l 64"
    if [ -z "${STOKE_SANITIZE:-}" ]; then # ASan's mlock() does nothing and succeeds
        expect err.txt "cannot lock"
        expect out.txt '"ring_locked": false'
    fi
    [ "$(checksum out.txt)" = "$REF" ] || fail "checksum differs as a non-root user"
else
    echo "note: cannot run as another user here (not root, or the build is not readable): that check is skipped"
fi

# Read only, cold cache, simulated compute, a raw dataset with its default transform.
run 0 "$STOKE" bench --batch 4 --epochs 2 --no-decode --cold --json good.stoke
expect out.txt '"images": 22'
expect out.txt '"decode": false'
run 0 "$STOKE" bench --batch 4 --images 8 --compute-ms 2 good.stoke
expect out.txt "stall"
run 0 "$STOKE" pack --from idx "$FX/idx" idx.stoke
run 0 "$STOKE" bench --batch 16 --epochs 1 idx.stoke
expect out.txt "transform pad:4,crop:28,flip"
expect out.txt "50 images in"
# Ctrl-C mid-epoch: the loader's threads are joined, everything is freed
# (the sanitizer builds check), and the run says it was interrupted.
"$STOKE" bench --batch 2 --epochs 100000 --transform rrc:64 good.stoke >out.txt 2>err.txt &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] || fail "bench after SIGINT exited $rc (wanted 130)"
expect err.txt "bench interrupted after"

# Usage errors and impossible settings.
run 2 "$STOKE" bench --io floppy good.stoke
expect err.txt "--io floppy: expected uring, pread or mmap"
run 2 "$STOKE" bench --dtype f64 good.stoke
run 2 "$STOKE" bench --transform rrc:224,smudge good.stoke
expect err.txt 'transform "smudge": unknown transform'
run 2 "$STOKE" bench --images 5 --epochs 1 good.stoke
run 2 "$STOKE" bench --compute-ms nan good.stoke
expect err.txt "--compute-ms nan: expected a number"
run 2 "$STOKE" bench --transform , good.stoke
expect err.txt "an empty token"
run 1 "$STOKE" bench --batch 64 --transform rrc:8 missing.stoke
# A transform that cannot fit the dataset's images is refused before the
# first batch, naming the file and the cause, with one line of stderr.
run 0 "$STOKE" pack --from idx "$FX/idx" tiny.stoke
run 2 "$STOKE" bench --batch 4 --epochs 1 --transform pad:4,crop:64 tiny.stoke
expect err.txt "tiny.stoke: transform \"pad:4,crop:64\": crop:64 is larger than the smallest images (28x28, 36x36 with pad:4)"
[ "$(wc -l < err.txt)" -le 2 ] || fail "the refusal printed more than one line"
finish
