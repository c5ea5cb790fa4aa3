#!/bin/sh
# The Python package's type stubs (python/stoke/_stoke.pyi) match the
# extension module as built: every public name, every parameter and its
# default, checked by mypy's stubtest against the module itself (mypy in the
# test venv, scripts/make-venv.sh; skipped without it).
set -eu
VPY=${STOKE_VENV_PYTHON:-}
if [ -z "$VPY" ] || ! "$VPY" -c "import mypy.stubtest" 2>/dev/null; then
    echo "no mypy in the test venv (scripts/make-venv.sh): the stubs are not checked"
    exit 77
fi
mkdir -p "$WORK"
cd "$WORK" # (not the source tree: mypy would find the package twice)
"$VPY" -m mypy.stubtest stoke
