#!/bin/sh
# The Python environment the tests use beyond Debian's packages: a venv over
# Debian's /usr/bin/python3 that still sees its torch/numpy/PIL
# (--system-site-packages), with TensorBoard from PyPI, whose own event
# reader checks the files `stoke train` writes (tests/python/check_tfevents.py),
# and scikit-build-core, the build backend of `pip install .` (pyproject.toml),
# so tests/cli/test_pip_install.sh builds the wheel without the network,
# and safetensors, onnx and onnxruntime, which read and run what `stoke
# export` writes (tests/python/check_export_weights.py, check_onnx.py).
# Quietly does nothing when it is there already. Without PyPI the tests that
# need it report themselves skipped.
set -eu
cd "$(dirname "$0")/.."
VENV=${STOKE_VENV:-.venv}
TENSORBOARD="tensorboard==2.21.0"
SKBUILD="scikit-build-core==1.1.2"
SAFETENSORS="safetensors==0.8.0"
ONNX="onnx==1.23.2"
ORT="onnxruntime==1.32.0"
MYPY="mypy==1.19.1" # stubtest checks the Python package's stubs (tests/cli/test_stubs.sh)
# Debian's numpy stays: Debian's torch is built against it (onnx would pull numpy 2)
NUMPY="numpy==$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import tensorboard, scikit_build_core, safetensors, onnx, onnxruntime, mypy" 2>/dev/null; then
    exit 0
fi
echo "make-venv: $VENV with $TENSORBOARD, $SKBUILD, $SAFETENSORS, $ONNX, $ORT and $MYPY (PyPI)"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
if ! "$VENV/bin/pip" install -q --disable-pip-version-check "$TENSORBOARD" "$SKBUILD" "$SAFETENSORS" "$ONNX" "$ORT" "$MYPY" "$NUMPY"; then
    echo "make-venv: could not install $TENSORBOARD, $SKBUILD, $SAFETENSORS, $ONNX and $ORT from PyPI; the TensorBoard reader, pip install and export tests will be skipped" >&2
fi
