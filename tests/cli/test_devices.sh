#!/bin/sh
# stoke devices: always answers (exit 0), lists the CPU backend, and lists GPUs
# or says plainly why there is none; --device cuda then fails with that reason.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" devices
expect out.txt "cpu     "
expect out.txt "oneDNN"
grep -q '^gpu ' out.txt || fail "no gpu line"
run 0 "$STOKE" devices --json
"$PYTHON3" - <<'PY' || fail "devices --json"
import json
d = json.load(open("out.txt"))
for k in ("cpu", "cuda_built", "cuda_runtime", "cuda_driver", "gpus"):
    assert k in d, k
assert d["gpus"] or d["cuda_reason"], d
open("gpus.txt", "w").write(str(len(d["gpus"])))
PY
if [ "$(cat gpus.txt)" = 0 ]; then
    expect out.txt "cuda_reason"
    run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
    run 1 "$STOKE" train --data tiny.stoke --model mlp --device cuda --out r
    expect err.txt "no CUDA device is available: "
fi
run 2 "$STOKE" devices --gpu
run 0 "$STOKE" help devices
expect out.txt "--json"
finish
