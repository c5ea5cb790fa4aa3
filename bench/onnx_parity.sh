#!/bin/sh
# torchvision's models exported by PyTorch 2.x (the venv of
# bench/make-torch-venv.sh; torch.onnx.export in training mode, dynamo=False)
# and run by Stoke's importer in eval mode: the logits beside PyTorch's for
# the same input and weights (tests/onnx_forward.c, 1e-4 of the largest logit).
# The models are too large to commit as test fixtures; this runs them here.
#
#   bench/onnx_parity.sh [BUILD_DIR]
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${STOKE_TORCH_VENV:-$HERE/../.venv-torch}/bin/python
W=$(mktemp -d)
"$PY" - "$W" "$HERE" <<'PYX'
import os, sys, warnings
warnings.filterwarnings("ignore")
out, here = sys.argv[1], sys.argv[2]
sys.path[:0] = [os.path.join(here, "..", "tests", "fixtures")]
import torch, torchvision
from make_onnx_fixtures import export_training, save_safetensors
for name, size in (("resnet18", 64), ("mobilenet_v3_small", 64), ("efficientnet_b0", 64),
                   ("convnext_tiny", 64), ("vit_b_16", 224)):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(num_classes=10)
    with torch.no_grad():  # logits and statistics far from torchvision's zero-ish heads
        for mod in m.modules():
            if isinstance(mod, torch.nn.Linear):
                torch.nn.init.normal_(mod.weight, 0, 0.1)
                torch.nn.init.uniform_(mod.bias, -0.1, 0.1)
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    export_training(m, torch.randn(2, 3, size, size), os.path.join(out, name + ".onnx"))
    m.eval()
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        save_safetensors(os.path.join(out, name + ".io.safetensors"), {"input": x, "logits": m(x)})
PYX
fails=0
for m in resnet18 mobilenet_v3_small efficientnet_b0 convnext_tiny vit_b_16; do
    "$BUILD/tests/onnx_forward" "$W/$m.onnx" "$W/$m.io.safetensors" || fails=$((fails + 1))
done
rm -rf "$W"
exit $fails
