#!/bin/sh
# A dataset larger than the memory limit, for real: stoke bench inside a
# cgroup v1 memory controller whose limit is below the file's size. Every
# epoch completes (never killed), reads go around the page cache, the static
# cache saves its share of the device reads, and the batches are those of an
# unconstrained run. Skipped (77) without a writable memory controller (not
# root, cgroup v2 only) and in sanitizer builds (their shadow memory is not
# the loader's).
. "$STOKE_TESTS/cli/lib.sh"
MEMCG=/sys/fs/cgroup/memory
[ -n "${STOKE_SANITIZE:-}" ] && { echo "skip: sanitizer build"; exit 77; }
[ -w "$MEMCG" ] || { echo "skip: no writable cgroup v1 memory controller"; exit 77; }
CG=$MEMCG/stoke-test-$$
mkdir "$CG" 2>/dev/null || { echo "skip: cannot make a memory cgroup"; exit 77; }
trap 'rmdir "$CG" 2>/dev/null' EXIT

# 80,000 raw 28x28 images (about 66 MB packed), shuffled at pack time.
"$PYTHON3" - <<'PY' || fail "cannot write the IDX files"
import numpy as np
n = 80000
rng = np.random.default_rng(7)
labels = rng.integers(0, 10, n, dtype=np.uint8)
images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
images[:, :4, :] = labels[:, None, None] * 25  # a stripe that says the label
with open("images-idx3-ubyte", "wb") as f:
    f.write(np.array([0x803, n, 28, 28], dtype=">u4").tobytes())
    f.write(images.tobytes())
with open("labels-idx1-ubyte", "wb") as f:
    f.write(np.array([0x801, n], dtype=">u4").tobytes())
    f.write(labels.tobytes())
PY
run 0 "$STOKE" pack --from idx --shuffle --seed 3 images-idx3-ubyte labels-idx1-ubyte big.stoke
SIZE=$(stat -c %s big.stoke)
LIMIT=$((40 << 20))
[ "$SIZE" -gt $((LIMIT + (16 << 20))) ] || fail "the file ($SIZE bytes) should be well over the limit"
echo $LIMIT >"$CG/memory.limit_in_bytes"

# in_cgroup CMD...: run CMD inside the limit (out.txt, err.txt, as run does)
in_cgroup() {
    want=$1
    shift
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "$@" >out.txt 2>err.txt
    got=$?
    [ "$got" = "$want" ] || { fail "exit $got (wanted $want) in the cgroup: $*"; head -5 err.txt >&2; }
}
json() { "$PYTHON3" -c 'import json,sys; d=json.load(open("out.txt")); print(eval(sys.argv[1]))' "$1"; }

B="--batch 256 --workers 2 --epochs 2 --order block --block-mib 1 --block-window 2 --json"
run 0 "$STOKE" bench $B big.stoke
REF=$(json 'd["checksum"]')
in_cgroup 0 "$STOKE" bench $B --cache-mib 8 big.stoke
expect err.txt "do not fit the memory cgroup's limit (40 MiB): reading with O_DIRECT"
[ "$(json 'd["checksum"]')" = "$REF" ] || fail "block order in the cgroup delivered other batches"
[ "$(json 'd["direct"]')" = True ] || fail "O_DIRECT was not turned on"
[ "$(json 'round(d["cache_mb"])')" -ge 7 ] || fail "no static cache"
# The second epoch: the cache's blocks cost no read; the rest is read once.
# (The device count is the kernel's: 0 where the file system has no device.)
DEV=$(json 'd["epochs"][1]["device_mb"]')
"$PYTHON3" - "$DEV" "$(json 'd["cache_mb"]')" "$SIZE" <<'PY' || fail "device bytes per epoch off"
import sys
dev, cache, size = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) / 1e6
want = size - cache
if dev == 0:
    print("note: the kernel counted no device reads (no block device under the file)")
else:
    assert abs(dev - want) <= 0.1 * want, (dev, want)
PY
HITS=$(json 'd["epochs"][1]["cache_hit_pct"]')
"$PYTHON3" -c "import sys; h=float(sys.argv[1]); assert 5 < h < 25, h" "$HITS" \
    || fail "cache hit rate $HITS% for an 8 MiB cache of a $SIZE-byte file"

# Random order in the same limit: completes, with the same batches as outside.
R="--batch 256 --workers 2 --epochs 2 --json"
run 0 "$STOKE" bench $R big.stoke
REF=$(json 'd["checksum"]')
in_cgroup 0 "$STOKE" bench $R big.stoke
[ "$(json 'd["checksum"]')" = "$REF" ] || fail "random order in the cgroup delivered other batches"

# Block sizes are fitted to the limit (with a notice), not killed.
in_cgroup 0 "$STOKE" bench --batch 256 --workers 2 --epochs 1 --order block big.stoke
expect err.txt "block order: two windows of 8 blocks of 8 MiB would be more than a quarter"
# A cache the limit cannot hold is refused, naming the flag's value and the limit.
in_cgroup 2 "$STOKE" bench --cache-mib 20 big.stoke
expect err.txt "cache 20 MiB: with the batch ring, more than half of the memory cgroup's limit (40 MiB)"

grep -q "^oom_kill 0" "$CG/memory.oom_control" || fail "the OOM killer ran: $(cat "$CG/memory.oom_control")"
finish
