#!/bin/sh
# stoke train and stoke eval with --device cuda, against the same runs on the
# CPU: the whole pipeline (pinned batches, the H2D stage on the copy stream,
# every op of mlp and resnet8 forward and backward, SGD, checkpoints through
# host copies, resume). Runs where `stoke devices` lists a GPU: a real one,
# or the host emulation of the STOKE_CUDA=EMULATE build; skipped elsewhere.
. "$STOKE_TESTS/cli/lib.sh"
if ! "$STOKE" devices | grep -q '^gpu [0-9]'; then
    echo "skipped: no CUDA device"
    exit 77
fi
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 random 28x28 images
T="--data tiny.stoke --val tiny.stoke --batch 8 --threads 1 --workers 1"
# resnet8 through the emulation's naive convolutions takes minutes under
# ThreadSanitizer: that build trains the mlp only (the op tests cover the rest)
MODELS="mlp resnet8"
[ "${STOKE_SANITIZE:-}" = thread ] && MODELS=mlp

# The same runs on both devices end with the same weights (to rounding).
# With TF32 off: cuDNN's convolutions use it on Ampere and later by
# default, as PyTorch's do (10-bit products), and on an H100 resnet8's
# momentum buffers then ended up to 5% of their scale apart after 12 steps;
# without it at most 0.14% (the tolerance is 0.5%).
export NVIDIA_TF32_OVERRIDE=0
for m in $MODELS; do
    run 0 "$STOKE" train $T --model $m --epochs 2 --out cpu_$m --device cpu --json
    cp out.txt cpu_$m.json
    run 0 "$STOKE" train $T --model $m --epochs 2 --out gpu_$m --device cuda --json
    cp out.txt gpu_$m.json
    "$PYTHON3" - "$STOKE_TESTS/python" $m <<'PY' || fail "$m: cuda and cpu runs differ"
import sys, json
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
m = sys.argv[2]
c, _ = st_io.load("cpu_%s/last.safetensors" % m)
g, _ = st_io.load("gpu_%s/last.safetensors" % m)
assert c.keys() == g.keys()
most = 0
for k in c:
    scale = 1 + np.abs(c[k]).max()
    err = np.abs(c[k].astype(np.float64) - g[k]).max()
    assert err <= 5e-3 * scale, (k, err, scale)  # float vs double summation orders
    most = max(most, err / scale)
jc = json.load(open("cpu_%s.json" % m)); jg = json.load(open("gpu_%s.json" % m))
assert abs(jc["val_loss"] - jg["val_loss"]) < 1e-3, (jc, jg)
print(m, "cuda vs cpu: weights within %.2g of their scale, val_loss %s vs %s"
      % (most, jg["val_loss"], jc["val_loss"]))
PY
done

# stoke eval on the GPU agrees with the run's last validation.
last=$(echo $MODELS | sed 's/.* //')
run 0 "$STOKE" eval --data tiny.stoke --checkpoint gpu_$last/last.safetensors --batch 8 \
    --device cuda --json
cp gpu_$last.json train.json
"$PYTHON3" - <<'PY' || fail "eval --device cuda"
import json
e = json.load(open("out.txt")); t = json.load(open("train.json"))
assert abs(e["val_loss"] - t["val_loss"]) < 1e-4 and e["val_top1"] == t["val_top1"], (e, t)
PY

# Resume on the GPU: stopped after epoch 1 and resumed equals two straight
# epochs (the optimizer state goes through the checkpoint's host copies).
run 0 "$STOKE" train $T --model mlp --epochs 2 --out resumed --device cuda --stop-after 1
run 0 "$STOKE" train $T --model mlp --epochs 2 --out resumed --device cuda --resume
"$PYTHON3" - "$STOKE_TESTS/python" <<'PY' || fail "resume on cuda is not identical"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load("gpu_mlp/last.safetensors")
b, _ = st_io.load("resumed/last.safetensors")
for k in a:
    assert np.array_equal(a[k], b[k]), k
PY

# --amp: f16 matmuls (and convolutions) with loss scaling land near the f32 run.
for m in $MODELS; do
    run 0 "$STOKE" train $T --model $m --epochs 2 --out amp_$m --device cuda --amp --json
    expect err.txt "amp: 0 of 12 steps skipped"
    "$PYTHON3" - $m <<'PY' || fail "$m: --amp is far from the f32 run"
import json, sys
m = sys.argv[1]
a = json.load(open("out.txt")); f = json.load(open("gpu_%s.json" % m))
assert abs(a["val_loss"] - f["val_loss"]) < 0.02, (a, f)
print(m, "--amp vs f32 val_loss:", a["val_loss"], f["val_loss"])
PY
done
run 2 env DNNL_MAX_CPU_ISA=AVX2 "$STOKE" train $T --model mlp --amp --out r
expect err.txt "--amp on the CPU runs in bf16 and needs bf16 instructions"

run 2 "$STOKE" train $T --model mlp --device tpu --out r
expect err.txt "--device tpu: expected cpu, cuda or cuda:N"
run 2 "$STOKE" train $T --model mlp --device cuda:x --out r
expect err.txt "N must be a GPU number"
n=$("$STOKE" devices | grep -c '^gpu [0-9]')
run 1 "$STOKE" train $T --model mlp --device cuda:$n --out r
expect err.txt "GPU $n: this machine has $n ("
finish
