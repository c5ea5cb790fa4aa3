#!/bin/sh
# Stoke's loader against PyTorch's DataLoader, side by side in one run, same
# file, same workers, same batch, equivalent transforms (rrc:224,flip, u8).
# Neither side hashes the pixels (--no-checksum): a training run does not.
#   bench/compare_pytorch.sh path/to/stoke DATA.stoke [WORKERS] [IMAGES]
set -eu
STOKE=$1
DATA=$2
W=${3:-2}
N=${4:-12000}
S=$("$STOKE" bench --workers "$W" --batch 256 --images "$N" --transform rrc:224,flip --no-checksum --json "$DATA" 2>/dev/null)
P=$(/usr/bin/python3 "$(dirname "$0")/pytorch_loader.py" "$DATA" --workers "$W" --batch 256 --images "$N")
echo "stoke:   $S"
echo "pytorch: $P"
/usr/bin/python3 - "$S" "$P" <<'PY'
import json, sys
s, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"stoke {s['images_per_sec']:.0f} images/s, PyTorch {p['images_per_sec']:.0f} images/s "
      f"with {s['workers']} workers: {s['images_per_sec'] / p['images_per_sec']:.2f}x")
PY
