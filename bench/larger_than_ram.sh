#!/bin/bash
# The larger-than-memory targets of the README ("Datasets larger than memory"),
# measured in one run on this machine:
#   1. an ImageNet-sized record count (1,281,167 raw 28x28 images, 1.34 GB):
#      pack's peak RSS; a cold open (page cache dropped): seconds, peak RSS;
#   2. that file inside a memory cgroup of a third of its size: block order
#      with a static cache, every epoch, device bytes per epoch against
#      (1 - C/size) x size; then block against random order reading from the
#      device (O_DIRECT, --no-decode) at queue depths 1, 8 and 32;
#   3. Fashion-MNIST's training set inside a 64 MB cgroup, random and block
#      order, against the unconstrained rate, and the unconstrained peak RSS.
# Needs root (cgroup v1 memory controller, /proc/sys/vm/drop_caches) and
# about 4 GB of disk under WORK. Not part of CI.
#
#   bench/larger_than_ram.sh build/stoke /usr/share/datasets/fashion-mnist [WORK]
set -u
STOKE=$(realpath "$1")
FMNIST=$2
WORK=${3:-/tmp/stoke-larger-than-ram}
MEMCG=/sys/fs/cgroup/memory
[ "$(id -u)" = 0 ] && [ -w "$MEMCG" ] || { echo "needs root and a cgroup v1 memory controller" >&2; exit 77; }
mkdir -p "$WORK" && cd "$WORK" || exit 1

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# peak CMD...: run CMD under /usr/bin/time, print "seconds peak_MB" on fd 3
peak() {
    /usr/bin/time -f "%e %M" -o time.txt "$@" >out.txt 2>err.txt || { echo "failed: $*" >&2; tail -3 err.txt >&2; }
    read -r s kb <time.txt
    printf '%s s, peak RSS %.0f MB' "$s" "$(echo "$kb / 1024" | bc -l)"
}
# in_cgroup MB CMD...: run CMD in a fresh memory cgroup of MB, page cache dropped first
in_cgroup() {
    local cg=$MEMCG/stoke-bench-$$ mb=$1
    shift
    mkdir -p "$cg" && echo $((mb << 20)) >"$cg/memory.limit_in_bytes"
    drop
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@" >out.txt 2>err.txt
    local rc=$?
    KILLS=$(awk '/oom_kill /{print $2}' "$cg/memory.oom_control")
    rmdir "$cg"
    return $rc
}
json() { /usr/bin/python3 -c 'import json,sys; d=json.load(open("out.txt")); print(eval(sys.argv[1]))' "$1"; }

echo "== 1. 1,281,167 records =="
if [ ! -f imgs-idx3-ubyte ]; then
    /usr/bin/python3 - <<'PY'
import numpy as np
n, rng = 1281167, np.random.default_rng(0)
labels = rng.integers(0, 10, n, dtype=np.uint8)
with open("imgs-idx3-ubyte", "wb") as f:
    f.write(np.array([0x803, n, 28, 28], dtype=">u4").tobytes())
    for a in range(0, n, 100000):
        f.write(rng.integers(0, 256, (min(100000, n - a), 28, 28), dtype=np.uint8).tobytes())
with open("labels-idx1-ubyte", "wb") as f:
    f.write(np.array([0x801, n], dtype=">u4").tobytes() + labels.tobytes())
PY
fi
drop
echo "pack --shuffle: $(peak "$STOKE" pack --from idx --shuffle imgs-idx3-ubyte labels-idx1-ubyte big.stoke)"
SIZE=$(stat -c %s big.stoke)
drop
echo "stoke info, cold: $(peak "$STOKE" info big.stoke)"

echo "== 2. the file inside a cgroup of a third of its size =="
LIMIT=$((SIZE / 3 >> 20))
CACHE=$((LIMIT / 4))
in_cgroup $LIMIT "$STOKE" bench --order block --cache-mib $CACHE --epochs 3 --json big.stoke
echo "limit $LIMIT MiB, file $((SIZE >> 20)) MiB, --cache-mib $CACHE: rc $?, OOM kills $KILLS"
/usr/bin/python3 - "$SIZE" <<'PY'
import json, sys
d, size = json.load(open("out.txt")), int(sys.argv[1]) / 1e6
want = size - d["cache_mb"]
print(f"  direct {d['direct']}, cache {d['cache_mb']:.0f} MB, peak RSS {d['peak_rss_mb']:.0f} MB")
for e, x in enumerate(d["epochs"]):
    print(f"  epoch {e}: {x['images_per_sec']:.0f} images/s, device {x['device_mb']:.0f} MB "
          f"= {x['device_mb'] / want:.3f} x (1 - C/size) x size ({want:.0f} MB), "
          f"cache hits {x['cache_hit_pct']:.1f}%")
PY
for qd in 1 8 32; do
    for order in random block; do
        in_cgroup $LIMIT "$STOKE" bench --order $order --io-depth $qd --no-decode --images 300000 \
            --warmup 0 --json big.stoke
        eval "R_$order=$(json 'd["images_per_sec"]') D_$order=$(json 'round(d["device_mb"])')"
    done
    /usr/bin/python3 -c "import sys; r, b = map(float, sys.argv[1:3]); print(f'  queue depth {sys.argv[5]}: random {r:.0f}/s ({sys.argv[3]} MB from the device), block {b:.0f}/s ({sys.argv[4]} MB): block / random = {b / r:.2f}x')" \
        "$R_random" "$R_block" "$D_random" "$D_block" $qd
done

echo "== 3. Fashion-MNIST's training set in a 64 MB cgroup =="
"$STOKE" pack --from idx --shuffle "$FMNIST" fmnist.stoke >/dev/null 2>&1
for order in random block; do
    in_cgroup 100000 "$STOKE" bench --order $order --epochs 2 --json fmnist.stoke
    FREE=$(json 'd["images_per_sec"]')
    RSS=$(json 'd["peak_rss_mb"]')
    in_cgroup 64 "$STOKE" bench --order $order --epochs 2 --json fmnist.stoke
    rc=$?
    CG=$(json 'd["images_per_sec"]')
    /usr/bin/python3 -c "import sys; f, c = map(float, sys.argv[1:3]); print(f'  {sys.argv[3]}: unconstrained {f:.0f}/s (peak RSS {sys.argv[4]} MB), 64 MB cgroup {c:.0f}/s = {c / f:.2f}x, rc {sys.argv[5]}, OOM kills {sys.argv[6]}')" \
        "$FREE" "$CG" $order "$RSS" $rc "$KILLS"
done
