#!/bin/sh
# examples/train_pytorch.py fed by stoke.Loader, by PyTorch's DataLoader
# (2 workers, ImageFolder + torchvision transforms over the original folder)
# and by no loader at all (one batch reused: the loop's compute ceiling), with
# Debian's torch 1.13 and with current torch from PyPI (bench/make-torch-venv.sh)
# when .venv-torch exists. resnet18, rrc:64,flip, batch 64, 2 loader workers,
# 2 compute threads.
#   bench/python_train.sh BUILD_DIR DATA.stoke IMAGE_FOLDER [STEPS]
set -eu
BUILD=$1
DATA=$2
FOLDER=$3
STEPS=${4:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
EX="$HERE/../examples/train_pytorch.py"
export PYTHONPATH="$BUILD/python"
for PY in /usr/bin/python3 "$HERE/../.venv-torch/bin/python"; do
    [ -x "$PY" ] || continue
    S=$("$PY" "$EX" "$DATA" --steps "$STEPS" --json)
    T=$("$PY" "$EX" "$DATA" --steps "$STEPS" --json --torch-loader "$FOLDER")
    C=$("$PY" "$EX" "$DATA" --steps "$STEPS" --json --synthetic)
    printf '%s\n%s\n%s\n' "$S" "$T" "$C"
    /usr/bin/python3 - "$S" "$T" "$C" <<'PY'
import json, sys
s, t, c = (json.loads(a) for a in sys.argv[1:])
print(f"torch {s['torch']}: stoke.Loader {s['images_per_sec']} images/s (waits {s['data_wait_pct']}%), "
      f"DataLoader {t['images_per_sec']} (waits {t['data_wait_pct']}%), no loader {c['images_per_sec']}: "
      f"stoke/DataLoader {s['images_per_sec'] / t['images_per_sec']:.2f}x; of the ceiling: "
      f"stoke {100 * s['images_per_sec'] / c['images_per_sec']:.0f}%, "
      f"DataLoader {100 * t['images_per_sec'] / c['images_per_sec']:.0f}%")
PY
done
