#!/bin/sh
# The Python environment the tests use beyond Debian's packages: a venv over
# Debian's /usr/bin/python3 that still sees its torch/numpy/PIL
# (--system-site-packages), with TensorBoard from PyPI, whose own event
# reader checks the files `stoke train` writes (tests/python/check_tfevents.py),
# and scikit-build-core, the build backend of `pip install .` (pyproject.toml),
# so tests/cli/test_pip_install.sh builds the wheel without the network,
# and safetensors, whose PyTorch loader reads what `stoke export` writes
# (tests/python/check_export_weights.py).
# Quietly does nothing when it is there already. Without PyPI the tests that
# need it report themselves skipped.
set -eu
cd "$(dirname "$0")/.."
VENV=${STOKE_VENV:-.venv}
TENSORBOARD="tensorboard==2.21.0"
SKBUILD="scikit-build-core==1.1.2"
SAFETENSORS="safetensors==0.8.0"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import tensorboard, scikit_build_core, safetensors" 2>/dev/null; then
    exit 0
fi
echo "make-venv: $VENV with $TENSORBOARD, $SKBUILD and $SAFETENSORS (PyPI)"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
if ! "$VENV/bin/pip" install -q --disable-pip-version-check "$TENSORBOARD" "$SKBUILD" "$SAFETENSORS"; then
    echo "make-venv: could not install $TENSORBOARD, $SKBUILD and $SAFETENSORS from PyPI; the TensorBoard reader, pip install and exported-weights tests will be skipped" >&2
fi
