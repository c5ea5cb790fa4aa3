#!/bin/sh
# `pip install .` as a user runs it: pyproject.toml's scikit-build-core build
# of the extension with the project's CMake, into a stable-ABI wheel
# (cp39-abi3), installed outside the source tree and used from Debian's
# python3: import, pack, info, one epoch of batches as torch tensors.
# scikit-build-core comes from the test venv (scripts/make-venv.sh), so the
# build needs no network (--no-build-isolation).
. "$STOKE_TESTS/cli/lib.sh"
VPY=${STOKE_VENV_PYTHON:-}
if [ -z "$VPY" ] || ! "$VPY" -c "import scikit_build_core" 2>/dev/null; then
    echo "skipped: no scikit-build-core in the test venv (scripts/make-venv.sh)"
    exit 77
fi
SRC=$(cd "$STOKE_TESTS/.." && pwd)
"$VPY" -m pip wheel -q --no-build-isolation --no-deps --disable-pip-version-check \
    --config-settings=build-dir="$WORK/skbuild" -w wheels "$SRC" >pip.txt 2>&1 || fail "pip wheel: $(tail -20 pip.txt)"
ls wheels/stoke_ml-0.1.0-cp39-abi3-linux_*.whl >/dev/null 2>&1 || fail "no abi3 wheel: $(ls wheels)"
"$VPY" -m pip install -q --no-deps --disable-pip-version-check --target site wheels/*.whl \
    >pip.txt 2>&1 || fail "pip install: $(tail -20 pip.txt)"
[ -f site/stoke/_stoke.abi3.so ] && [ -f site/stoke/_stoke_run.abi3.so ] && [ -f site/stoke/__init__.py ] ||
    fail "installed: $(find site)"
# PEP 561: the wheel carries the marker and the stubs; and the LICENSE pyproject names
[ -f site/stoke/py.typed ] && [ -f site/stoke/_stoke.pyi ] && [ -f site/stoke/_stoke_run.pyi ] || fail "no py.typed or stubs: $(find site)"
[ -f site/stoke_ml-0.1.0.dist-info/licenses/LICENSE ] || fail "no LICENSE in the wheel: $(ls -R site/*.dist-info)"
cat >use.py <<'PY'
import sys, torch, stoke
assert stoke.__file__.startswith(sys.argv[1]), stoke.__file__
summary = stoke.pack(sys.argv[2], "tiny.stoke", kind="idx")
assert summary["records"] == 50, summary
assert stoke.info("tiny.stoke")["records"] == 50
n = 0
with stoke.Loader("tiny.stoke", 8, transform="center:28", workers=2) as loader:
    for images, labels in loader:
        n += torch.from_dlpack(images).shape[0]
assert n == 50, n
res = stoke.train(data="tiny.stoke", model="mlp", epochs=1, batch=10, out="run", no_tensorboard=True)
assert res["epochs"] == 1 and res["stop_reason"] == "finished", res
print("installed stoke works")
PY
PYTHONPATH="$PWD/site" "$PYTHON3" use.py "$PWD/site" "$STOKE_FIXTURES/idx" >use.txt 2>&1 || fail "$(cat use.txt)"
expect use.txt "installed stoke works"
finish
