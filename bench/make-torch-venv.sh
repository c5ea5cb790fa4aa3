#!/bin/sh
# The current-PyTorch peer for benchmarks (never for tests): a venv over
# Debian's /usr/bin/python3 (--system-site-packages keeps Debian's numpy and
# PIL visible) with torch and torchvision from PyPI, which shadow Debian's
# 1.13 inside it. About 5.5 GB with the CUDA wheels PyPI ships for Linux.
#   bench/make-torch-venv.sh            -> .venv-torch
#   .venv-torch/bin/python examples/train_pytorch.py ...
set -eu
cd "$(dirname "$0")/.."
VENV=${STOKE_TORCH_VENV:-.venv-torch}
# Debian's 1.13 is visible through --system-site-packages: ask for 2.x.
CURRENT='import sys, torch, torchvision, onnx; sys.exit(int(torch.__version__.split(".")[0]) < 2)'
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CURRENT" 2>/dev/null; then
    "$VENV/bin/python" -c "import torch, torchvision; print('make-torch-venv: torch', torch.__version__, 'torchvision', torchvision.__version__)"
    exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "torch>=2" "torchvision>=0.15" onnx
"$VENV/bin/python" -c "import torch, torchvision; print('make-torch-venv: torch', torch.__version__, 'torchvision', torchvision.__version__)"
