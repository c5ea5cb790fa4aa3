#!/bin/sh
# stoke train --amp on the CPU: matmuls and convolutions in bf16 where the
# CPU has bf16 instructions (`stoke devices` names oneDNN's ISA for them),
# close to the f32 run; refused with exit 2 where it has none, which
# DNNL_MAX_CPU_ISA=AVX2 stands in for on any CPU. (--amp on a GPU:
# test_train_cuda.sh.)
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 random 28x28 images
T="--data tiny.stoke --val tiny.stoke --batch 8 --threads 1 --workers 1 --epochs 3"

# Without bf16 instructions: refused before anything is written.
run 0 env DNNL_MAX_CPU_ISA=AVX2 "$STOKE" devices
expect out.txt "bf16 none (--amp needs AVX512_BF16 or AMX)"
run 2 env DNNL_MAX_CPU_ISA=AVX2 "$STOKE" train $T --model cnn --amp --out refused
expect err.txt "--amp on the CPU runs in bf16 and needs bf16 instructions (AVX512_BF16 or AMX), which this CPU (as limited by DNNL_MAX_CPU_ISA"
[ -e refused ] && fail "a refused --amp run wrote refused/"

if ! "$STOKE" devices | grep -q "bf16 on "; then
    run 2 "$STOKE" train $T --model cnn --amp --out refused
    expect err.txt "needs bf16 instructions (AVX512_BF16 or AMX), which this CPU lacks"
    echo "no bf16 instructions on this CPU: the bf16 runs are not tested here"
    finish
fi

# bf16 runs land within 0.05 of the f32 run's validation loss (after 3
# epochs on 50 images: the losses are about 2.2), and their weights differ
# from it (bf16 did run).
for m in cnn mlp resnet8; do
    run 0 "$STOKE" train $T --model $m --out f32_$m --json
    cp out.txt f32_$m.json
    run 0 "$STOKE" train $T --model $m --amp --out bf16_$m --json
    expect err.txt "amp: matmuls and convolutions in bf16 on avx512_core_"
    expect err.txt "no loss scaling"
    "$PYTHON3" - "$STOKE_TESTS/python" $m <<'PY' || fail "$m: --amp is far from the f32 run"
import sys, json
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
m = sys.argv[2]
a = json.load(open("out.txt")); f = json.load(open("f32_%s.json" % m))
assert abs(a["val_loss"] - f["val_loss"]) < 0.05, (a["val_loss"], f["val_loss"])
wa, _ = st_io.load("bf16_%s/last.safetensors" % m)
wf, _ = st_io.load("f32_%s/last.safetensors" % m)
most = max(np.abs(wa[k].astype(np.float64) - wf[k]).max() for k in wf)
assert most > 0, "the --amp weights equal the f32 run's: bf16 did not run"
print(m, "--amp vs f32: val_loss %.4f vs %.4f, weights at most %.2g apart"
      % (a["val_loss"], f["val_loss"], most))
PY
done

# Today's architectures under --amp (depthwise and grouped convolutions,
# SE, layer norm, attention; the depthwise ones partly in f32, see
# kernels/README.md): the first step's loss (same initial weights) within
# 1% of f32's, the weights after 3 epochs different from f32's (bf16 ran).
# Later losses are not compared: batch-8 steps on 50 random images make
# the batch-norm models' losses chaotic in either precision.
MODELS="mobilenet_v3_small efficientnet_b0 convnext_tiny vit_tiny regnet_y_400mf"
[ -n "${STOKE_SANITIZE:-}" ] && MODELS="mobilenet_v3_small vit_tiny"
for m in $MODELS; do
    run 0 "$STOKE" train $T --model $m --lr 0.01 --out f32_$m
    run 0 "$STOKE" train $T --model $m --lr 0.01 --amp --out bf16_$m
    expect err.txt "amp: matmuls and convolutions in bf16 on avx512_core_"
    "$PYTHON3" - "$STOKE_TESTS/python" $m <<'PY' || fail "$m: --amp is far from the f32 run"
import sys, csv
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
m = sys.argv[2]
first = lambda run: float(next(csv.DictReader(open(run + "/steps.csv")))["loss"])
a, f = first("bf16_" + m), first("f32_" + m)
assert abs(a - f) <= 0.01 * abs(f), (a, f)
wa, _ = st_io.load("bf16_%s/last.safetensors" % m)
wf, _ = st_io.load("f32_%s/last.safetensors" % m)
most = max(np.abs(wa[k].astype(np.float64) - wf[k]).max() for k in wf)
assert most > 0, "the --amp weights equal the f32 run's: bf16 did not run"
print(m, "--amp vs f32: first loss %.5f vs %.5f, weights at most %.2g apart" % (a, f, most))
PY
done

# Micro-batches run on a stage thread, which holds the autocast too: the
# weights differ from the same micro-batches in f32 (they did not, before).
run 0 "$STOKE" train $T --model cnn --micro-batches 2 --out f32_micro
run 0 "$STOKE" train $T --model cnn --micro-batches 2 --amp --out bf16_micro
"$PYTHON3" - "$STOKE_TESTS/python" <<'PY' || fail "--amp with --micro-batches ran in f32"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load("f32_micro/last.safetensors")
b, _ = st_io.load("bf16_micro/last.safetensors")
assert any(not np.array_equal(a[k], b[k]) for k in a), "identical weights"
PY

# Resuming an --amp run continues it exactly; the checkpoint holds the f32
# master weights.
run 0 "$STOKE" train $T --model cnn --amp --out resumed --stop-after 1
run 0 "$STOKE" train $T --model cnn --amp --out resumed --resume
"$PYTHON3" - "$STOKE_TESTS/python" <<'PY' || fail "an --amp run stopped and resumed differs from a straight one"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load("bf16_cnn/last.safetensors")
b, _ = st_io.load("resumed/last.safetensors")
for k in a:
    assert a[k].dtype != np.float16 and np.array_equal(a[k], b[k]), k
PY
finish
