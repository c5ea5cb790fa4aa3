#!/bin/sh
# Pack throughput against a peer: `stoke pack` (which reads, fully decodes to
# validate, transcodes progressive files and writes LMDB) versus PIL merely
# opening and decoding the same JPEGs, both on one core.
#   bench/pack_vs_pil.sh path/to/stoke IMAGE_FOLDER
# Make a folder with ../shared/data/make-jpeg-set.sh (6,000 photos).
set -eu
STOKE=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
stoke_json=$("$STOKE" pack --workers 1 --json "$SRC" "$TMP/b.stoke" 2>/dev/null)
pil_rate=$(/usr/bin/python3 - "$SRC" <<'PY'
import os, sys, time
from PIL import Image
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(sys.argv[1]) for f in fs
               if f.lower().endswith((".jpg", ".jpeg")))
t = time.perf_counter()
for f in files:
    with Image.open(f) as im:
        im.load()
print(f"{len(files) / (time.perf_counter() - t):.1f}")
PY
)
stoke_rate=$(echo "$stoke_json" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])')
echo "stoke pack --workers 1 (read + validate + write): $stoke_rate images/s"
echo "PIL open + decode only, 1 thread:                $pil_rate images/s"
/usr/bin/python3 -c "print(f'ratio stoke/PIL: {$stoke_rate / $pil_rate:.2f}x')"
