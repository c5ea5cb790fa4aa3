#!/bin/sh
# The loader's performance targets, measured side by side in one run:
#   bench/loader_targets.sh BUILD_DIR DATA.stoke
# (speed runs use --no-checksum: a training run does not hash its pixels)
# 1. stoke bench against PyTorch's DataLoader, same workers (= cores)
# 2. stoke bench with workers = cores against cores x the single-core train
#    transform rate of bench_augment (d)
# 3. stoke bench --no-decode --cold --io uring against fio (bench/fio_records.fio)
# 4. data stall with a simulated step that needs 80% of the loader's capacity
# 5. peak RSS against 2 x the ring + 64 MiB
set -eu
B=$1
DATA=$2
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(nproc)
PY=/usr/bin/python3
field() { $PY -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

echo "== 1. against PyTorch's DataLoader ($W workers, batch 256, 2 epochs) =="
"$HERE/compare_pytorch.sh" "$B/stoke" "$DATA" "$W" 12000

echo "== 2. against cores x the single-core per-image rate =="
one=$("$B/bench_augment" "$DATA" --seconds 5 --only d | awk '/^\(d\)/ {for (i = 1; i < NF; i++) if ($(i + 1) == "images/s") print $i}')
S=$("$B/stoke" bench --batch 256 --workers "$W" --epochs 3 --no-checksum --json "$DATA" 2>/dev/null)
rate=$(field "$S" images_per_sec)
$PY -c "print(f'stoke bench {float($rate):.0f} images/s with $W workers; single core (d) {float($one):.0f}; ratio {float($rate) / ($W * float($one)):.2f}')"

echo "== 3. read path, cold cache, against fio =="
fio_mb=0
stoke_mb=0
for i in 1 2 3; do
    f=$(STOKE_DATA="$DATA" fio --output-format=json "$HERE/fio_records.fio" 2>/dev/null |
        $PY -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"] / 1e6)')
    s=$("$B/stoke" bench --no-decode --cold --io uring --workers 2 --epochs 1 --warmup 0 --json "$DATA" 2>/dev/null)
    echo "  run $i: fio $f MB/s, stoke $(field "$s" mb_per_sec) MB/s"
    fio_mb="$fio_mb $f"
    stoke_mb="$stoke_mb $(field "$s" mb_per_sec)"
done
$PY -c "
import statistics as st
f = st.median([float(x) for x in '$fio_mb'.split()[1:]]); s = st.median([float(x) for x in '$stoke_mb'.split()[1:]])
print(f'median: fio {f:.0f} MB/s, stoke {s:.0f} MB/s, ratio {s / f:.2f}')"

echo "== 4. data stall at 80% load =="
ms=$($PY -c "print(round(256 / float($rate) * 1000 / 0.8, 1))")
S=$("$B/stoke" bench --batch 256 --workers "$W" --epochs 3 --compute-ms "$ms" --no-checksum --json "$DATA" 2>/dev/null)
echo "  --compute-ms $ms: $(field "$S" images_per_sec) images/s, stall $(field "$S" stall_pct)%"

echo "== 5. peak memory (batch 256, prefetch 3, 224x224 u8) =="
S=$("$B/stoke" bench --batch 256 --workers "$W" --epochs 1 --json "$DATA" 2>/dev/null)
$PY -c "
ring = 3 * 256 * 224 * 224 * 3 / 2**20
rss = float($(field "$S" peak_rss_mb))
print(f'  peak RSS {rss:.0f} MiB, ring {ring:.0f} MiB, limit 2 x ring + 64 = {2 * ring + 64:.0f} MiB')"
