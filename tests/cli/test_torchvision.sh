#!/bin/sh
# Stoke's resnet18 checkpoints are usable by PyTorch users: torchvision's
# resnet18 loads one strictly and computes the same logits (within 1e-3).
# Skipped where Debian's python3-torch / python3-torchvision are missing.
. "$STOKE_TESTS/cli/lib.sh"
"$PYTHON3" -c 'import torch, torchvision' 2>/dev/null || { echo "python3-torch/torchvision missing: skipped"; exit 77; }
run 0 "$EXPORT_RESNET18" "$WORK"
run 0 "$PYTHON3" "$STOKE_TESTS/python/check_torchvision.py" "$WORK/resnet18.safetensors" "$WORK/io.safetensors"
cat out.txt
expect out.txt "tensors loaded strictly"
finish
