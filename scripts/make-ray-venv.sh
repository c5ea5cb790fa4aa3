#!/bin/sh
# A venv with Ray Tune from PyPI (.venv-ray, over Debian's python3, seeing its
# torch): the peer of `stoke tune`. tests/fixtures/make_tune_fixture.py
# records Ray's scheduler decisions with it (the fixture is committed; the
# tests do not need Ray), and bench/tune_vs_ray.py runs the same search
# through Ray Tune and PyTorch's DataLoader.
set -eu
cd "$(dirname "$0")/.."
VENV=${STOKE_RAY_VENV:-.venv-ray}
RAY="ray[tune]==2.40.0"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import ray.tune" 2>/dev/null; then
    exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$RAY"
