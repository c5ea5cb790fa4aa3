#!/bin/sh
# Stoke's resnet18 checkpoints are usable by PyTorch users: torchvision's
# resnet18 loads one strictly and computes the same logits (within 1e-3).
# And the other way: torchvision's resnet18/34/50, mobilenet_v2,
# efficientnet_b0, mobilenet_v3_small/large, convnext_tiny, regnet_y_400mf,
# vit_b_16 and vit_tiny (its VisionTransformer at timm's tiny sizes) with
# seeded random weights (tests/python/make_torchvision_init.py), saved as
# state dicts, load into Stoke's models as --init loads them and give
# torchvision's eval-mode logits within 1e-4 of the largest, with both stems
# (the small-image variants below 64 px).
# Skipped where Debian's python3-torch / python3-torchvision are missing.
. "$STOKE_TESTS/cli/lib.sh"
"$PYTHON3" -c 'import torch, torchvision' 2>/dev/null || { echo "python3-torch/torchvision missing: skipped"; exit 77; }
run 0 "$EXPORT_RESNET18" "$WORK"
run 0 "$PYTHON3" "$STOKE_TESTS/python/check_torchvision.py" "$WORK/resnet18.safetensors" "$WORK/io.safetensors"
cat out.txt
expect out.txt "tensors loaded strictly"
cases="resnet18:32 resnet34:64 resnet50:32 resnet50:64 mobilenet_v2:32 mobilenet_v2:64
    efficientnet_b0:32 efficientnet_b0:64 mobilenet_v3_small:32 mobilenet_v3_large:64
    convnext_tiny:32 convnext_tiny:64 regnet_y_400mf:32 regnet_y_400mf:64 vit_b_16:32
    vit_tiny:28 vit_tiny:64"
# ThreadSanitizer (an order of magnitude slower; the forward is one thread's
# code here): one of each kind of block
case "${STOKE_SANITIZE:-}" in
*thread*) cases="resnet18:32 mobilenet_v2:32 efficientnet_b0:32 mobilenet_v3_small:32
    convnext_tiny:32 vit_tiny:28" ;;
esac
for case in $cases; do
    m=${case%:*} s=${case#*:}
    run 0 "$PYTHON3" "$STOKE_TESTS/python/make_torchvision_init.py" $m $s "$WORK"
    run 0 "$INIT_LOGITS" $m $s "$WORK/$m-$s.weights.safetensors" "$WORK/$m-$s.io.safetensors"
    cat out.txt
    expect out.txt "$m at $s px"
done
finish
