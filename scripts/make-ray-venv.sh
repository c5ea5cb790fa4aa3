#!/bin/sh
# The peers' venv (.venv-ray, over Debian's python3), from PyPI: Ray Tune,
# the peer of `stoke tune` (tests/fixtures/make_tune_fixture.py records
# Ray's scheduler decisions with it: the fixture is committed, the tests do
# not need Ray; bench/tune_vs_ray.py runs the same search through Ray Tune
# and PyTorch's DataLoader), and current PyTorch with torchvision, onnx,
# onnxruntime and safetensors: bench/onnx_vs_torch.py (onnxruntime on
# Stoke's ONNX file and on torch.onnx.export's). About 6 GB.
set -eu
cd "$(dirname "$0")/.."
VENV=${STOKE_RAY_VENV:-.venv-ray}
RAY="ray[tune]==2.40.0"
PEERS="torch==2.15.0 torchvision==0.29.2 onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 safetensors==0.8.0"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import ray.tune, torchvision, onnx, onnxruntime, safetensors" 2>/dev/null; then
    exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q --disable-pip-version-check "$RAY" $PEERS
