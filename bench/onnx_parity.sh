#!/bin/sh
# torchvision's models exported by PyTorch 2.x (the venv of
# bench/make-torch-venv.sh, with onnxscript for the dynamo exporter) every
# way the importer reads, and run by it in eval mode: the logits beside
# PyTorch's for the same input and weights (tests/onnx_forward.c, 1e-4 of
# the largest logit). The models are too large to commit as test fixtures;
# this runs them here.
#
#   bench/onnx_parity.sh [BUILD_DIR]      MODELS="resnet18 ..." WAYS="legacy-train-17 ..."
#
# Ways: legacy-train-N (dynamo=False, training=TRAINING,
# do_constant_folding=False, opset N), legacy-eval-N (the same in eval mode;
# a file whose batch norm it folded is refused, saying so),
# dynamo-eval-N and dynamo-train-N (dynamo=True, optimize=False, the module
# in eval or training mode; opset 18 is the dynamo exporter's lowest).
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${STOKE_TORCH_VENV:-$HERE/../.venv-torch}/bin/python
MODELS=${MODELS:-resnet18 mobilenet_v3_small efficientnet_b0 convnext_tiny vit_b_16}
WAYS=${WAYS:-legacy-train-13 legacy-train-14 legacy-train-17 legacy-train-18 legacy-eval-17 dynamo-eval-18 dynamo-train-18}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# (the legacy exporter prints a failed export's graph from C++: kept aside)
if ! "$PY" - "$W" "$HERE" "$MODELS" "$WAYS" >"$W/export-log.txt" 2>&1 <<'PYX'
import contextlib, io, os, sys, warnings
warnings.filterwarnings("ignore")
out, here, models, ways = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
sys.path[:0] = [os.path.join(here, "..", "tests", "fixtures")]
import torch, torchvision
from make_onnx_fixtures import save_safetensors
def export(m, x, path, kind, mode, opset):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if kind == "dynamo":
            torch.onnx.export(m, (x,), path, dynamo=True, optimize=False, opset_version=int(opset),
                              input_names=["input"], output_names=["logits"],
                              dynamic_shapes=({0: torch.export.Dim("batch")},), external_data=False)
        else:
            torch.onnx.export(m, x, path, dynamo=False, opset_version=int(opset),
                              training=torch.onnx.TrainingMode.TRAINING if mode == "train"
                              else torch.onnx.TrainingMode.EVAL,
                              do_constant_folding=False, input_names=["input"],
                              output_names=["logits"],
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


for name in models:
    size = 224 if name == "vit_b_16" else 64
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
    x = torch.randn(2, 3, size, size)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    for way in ways:
        kind, mode, opset = way.split("-")
        m.load_state_dict(state)  # (a training-mode trace may move the statistics)
        m.train(mode == "train")
        path = os.path.join(out, f"{name}.{way}.onnx")
        try:
            export(m, x, path, kind, mode, opset)
        except Exception as e:  # (torch 2 exports vit_b_16's attention from opset 14 only)
            msg = str(e).strip().splitlines()[-1][:200]
            open(path + ".skip", "w").write(f"torch.onnx.export fails: {type(e).__name__}: {msg}\n")
            continue
        # PyTorch's eval logits with the weights the file holds (a training-mode
        # trace moves the running statistics before they are written)
        m.eval()
        with torch.no_grad():
            save_safetensors(os.path.join(out, f"{name}.{way}.io.safetensors"),
                             {"input": x, "logits": m(x)})
print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
PYX
then
    tail -20 "$W/export-log.txt"
    exit 1
fi
tail -1 "$W/export-log.txt"
fails=0
for m in $MODELS; do
    for way in $WAYS; do
        printf '%-20s %-16s ' "$m" "$way"
        if [ -e "$W/$m.$way.onnx.skip" ]; then
            cat "$W/$m.$way.onnx.skip"
        elif "$BUILD/tests/onnx_forward" "$W/$m.$way.onnx" "$W/$m.$way.io.safetensors" >"$W/out" 2>&1; then
            sed 's/^[^:]*: //' "$W/out"
        elif [ "${way#legacy-eval}" != "$way" ] && grep -q "batch norm is folded" "$W/out"; then
            echo "refused as it should be: batch norm folded by the eval-mode export"
        else
            cat "$W/out"
            fails=$((fails + 1))
        fi
    done
done
exit $fails
