#!/bin/sh
# stoke devices: always answers (exit 0), lists the CPU backend, and lists GPUs
# or says plainly why there is none; --device cuda then fails with that reason.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" devices
expect out.txt "cpu     "
expect out.txt "oneDNN"
expect out.txt " bf16 "
grep -q '^gpu ' out.txt || fail "no gpu line"
run 0 "$STOKE" devices --json
"$PYTHON3" - <<'PY' || fail "devices --json"
import json
d = json.load(open("out.txt"))
for k in ("cpu", "cpu_bf16", "cuda_built", "cuda_runtime", "cuda_driver", "gpus"):
    assert k in d, k
# the line and the field agree on bf16 (--amp on the CPU)
assert d["cpu_bf16"] in (None, "avx512_core_bf16", "avx512_core_amx"), d
assert ("bf16 on " + d["cpu_bf16"] if d["cpu_bf16"] else "bf16 none") in d["cpu"], d
assert d["gpus"] or d["cuda_reason"], d
open("gpus.txt", "w").write(str(len(d["gpus"])))
PY
if [ "$(cat gpus.txt)" = 0 ]; then
    expect out.txt "cuda_reason"
    run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
    run 1 "$STOKE" train --data tiny.stoke --model mlp --device cuda --out r
    expect err.txt "no CUDA device is available: "
fi
# the binary links no CUDA library: every build starts without them, and
# loads the backend module (libstoke_cuda.so) only for a GPU
readelf -d "$STOKE" | grep NEEDED | grep -E 'libcu|libnccl' && fail "stoke links a CUDA library"
STOKE_CUDA_MODULE=/nonexistent/libstoke_cuda.so run 0 "$STOKE" devices
expect out.txt "cuda    backend not loaded: /nonexistent/libstoke_cuda.so: cannot open shared object file"
expect out.txt "gpu     none: cannot load the CUDA backend (STOKE_CUDA_MODULE): /nonexistent/libstoke_cuda.so: cannot open"
lmdb=$(ldd "$STOKE" | awk '/liblmdb/ {print $3}')
STOKE_CUDA_MODULE=$lmdb run 0 "$STOKE" devices --json
expect out.txt "is not a Stoke CUDA module"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" mod.stoke
STOKE_CUDA_MODULE=$lmdb run 1 "$STOKE" train --data mod.stoke --model mlp --device cuda --out r
expect err.txt "not a Stoke CUDA backend module (no stk_cuda_module_open)"
run 2 "$STOKE" devices --gpu
run 0 "$STOKE" help devices
expect out.txt "--json"
finish
