#!/bin/sh
# stoke train and stoke eval end to end: outputs (lines, metrics.csv, checkpoints,
# JSON), resume bit-identical with 1 and 2 workers, --init/--freeze, and every
# refusal before training starts; a short real run on Fashion-MNIST learns.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
run 0 "$STOKE" pack --from idx "$FX/idx" tiny.stoke       # 50 random 28x28 images, 10 classes
run 0 "$STOKE" pack "$FX/good" jpeg.stoke                  # 11 JPEGs, 3 classes
T="--data tiny.stoke --val tiny.stoke --batch 8 --threads 2"

# A short run: lines, metrics.csv, checkpoints, JSON.
run 0 "$STOKE" train $T --model cnn --epochs 2 --out r1 --json
"$PYTHON3" - <<'PY' || fail "train --json keys"
import json
d = json.load(open("out.txt"))
for k in ("epochs", "val_top1", "val_top5", "val_loss", "train_images_per_sec", "stall_pct",
          "seconds", "peak_rss_mb", "params", "params_trainable"):
    assert k in d, k
assert d["params"] == d["params_trainable"] > 0, d
assert d["epochs"] == 2 and 0 <= d["val_top1"] <= 100 and d["val_top5"] >= d["val_top1"], d
PY
expect err.txt "epoch 2/2: loss"
expect err.txt "parameters: 94,186 trainable"
expect err.txt "memory: about "
expect err.txt "top-5"
[ "$(wc -l < r1/metrics.csv)" = 3 ] || fail "metrics.csv should have a header and 2 rows"
expect r1/metrics.csv "epoch,step,lr,train_loss,train_acc,val_loss,val_top1,val_top5,images_per_sec,stall_pct,seconds,mem_allocated_mb,mem_reserved_mb,mem_peak_mb,peak_rss_mb"
expect err.txt "cpu memory "
[ -f r1/last.safetensors ] && [ -f r1/best.safetensors ] || fail "checkpoints missing"
[ "$(wc -l < r1/steps.csv)" = 13 ] || fail "steps.csv should have a header and 12 rows"
ls r1/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard event file"
only_entries r1 5   # metrics.csv, steps.csv, the event file, last and best
run 0 "$STOKE" train $T --model mlp --epochs 1 --out r0 --no-tensorboard --memory-report
only_entries r0 4
expect err.txt "memory report: cpu caching allocator: "
expect err.txt "  size class                in use       bytes    cached       bytes  allocations from system"
expect err.txt "  <= 4 KiB "
run 2 "$STOKE" train $T --model mlp --epochs 1 --out r0 --no-tensorboard --tensorboard
expect err.txt "--tensorboard and --no-tensorboard: choose one"

# A run that would not fit the memory it may use is named before it starts.
run 0 env STOKE_MEMORY_LIMIT_MB=1 "$STOKE" train $T --model mlp --epochs 1 --out mem \
    --no-tensorboard
expect err.txt "stoke: warning: this run needs about "
expect err.txt "STOKE_MEMORY_LIMIT_MB allows (less a tenth), even at batch 1: train at a smaller image size"
# a limit that is not a number is refused, not ignored (by every command)
run 2 env STOKE_MEMORY_LIMIT_MB=abc "$STOKE" train $T --model mlp --epochs 1 --out mem2
expect err.txt "stoke: STOKE_MEMORY_LIMIT_MB=abc: expected a number of MiB above 0"
run 2 env STOKE_MEMORY_LIMIT_MB=0 "$STOKE" bench tiny.stoke
expect err.txt "STOKE_MEMORY_LIMIT_MB=0: expected a number of MiB above 0"

# Gradient clipping: the norm before clipping in steps.csv (empty cells
# without --clip-grad-norm), a run that clips differs from one that does
# not; bounds refused.
run 0 "$STOKE" train $T --model cnn --epochs 1 --out clip1 --no-tensorboard --clip-grad-norm 0.01
expect clip1/steps.csv "step,epoch,loss,lr,grad_norm"
"$PYTHON3" - <<'PY' || fail "steps.csv grad_norm"
import csv
rows = list(csv.DictReader(open("clip1/steps.csv")))
assert len(rows) == 6 and all(float(r["grad_norm"]) > 0.01 for r in rows), rows
rows = list(csv.DictReader(open("r0/steps.csv")))
assert rows and all(r["grad_norm"] in (None, "") for r in rows), rows
PY
run 0 "$STOKE" train $T --model cnn --epochs 1 --out clip2 --no-tensorboard --clip-grad-value 1e-4
cmp -s clip1/last.safetensors clip2/last.safetensors && fail "clipping by norm and by value agree"
run 2 "$STOKE" train $T --model cnn --out bad --clip-grad-norm 1 --clip-grad-value 1
expect err.txt "--clip-grad-norm and --clip-grad-value: choose one"
run 2 "$STOKE" train $T --model cnn --out bad --clip-grad-norm -1
expect err.txt "--clip-grad-norm"
run 2 "$STOKE" train --data tiny.stoke --model cnn --out bad --per-class
expect err.txt "--per-class evaluates --val per class into TensorBoard: it needs --val"

# The moving average of the weights: evaluated beside them each epoch
# (metrics.csv's ema_val_*), the best epoch chosen by it, eval --ema and
# export --ema read it back, a resumed run continues it bit for bit.
run 0 "$STOKE" train $T --model cnn --epochs 3 --out ema1 --no-tensorboard --ema-decay 0.9 \
    --ema-warmup --monitor ema_val_top1
expect out.txt "ema val loss"
expect out.txt "(ema_val_top1 "
run 0 "$STOKE" eval --data tiny.stoke --checkpoint ema1/last.safetensors --batch 8 --ema --json
cp out.txt ema_eval.json
run 0 "$STOKE" eval --data tiny.stoke --checkpoint ema1/last.safetensors --batch 8 --json
"$PYTHON3" - <<'PY' || fail "eval --ema against metrics.csv"
import csv, json
last = list(csv.DictReader(open("ema1/metrics.csv")))[-1]
ema, raw = json.load(open("ema_eval.json")), json.load(open("out.txt"))
assert abs(float(last["ema_val_loss"]) - ema["val_loss"]) < 1e-5, (last, ema)
assert abs(float(last["val_loss"]) - raw["val_loss"]) < 1e-5, (last, raw)
assert ema["val_loss"] != raw["val_loss"], (ema, raw)
PY
run 0 "$STOKE" train $T --model cnn --epochs 3 --out ema2 --no-tensorboard --ema-decay 0.9 \
    --ema-warmup --monitor ema_val_top1 --stop-after 1
run 0 "$STOKE" train $T --model cnn --epochs 3 --out ema2 --no-tensorboard --ema-decay 0.9 \
    --ema-warmup --monitor ema_val_top1 --resume
cmp -s ema1/last.safetensors ema2/last.safetensors || fail "a resumed --ema run differs"
run 0 "$STOKE" export ema1/last.safetensors --format safetensors --out ema.weights.safetensors --ema
run 0 "$STOKE" export ema1/last.safetensors --format safetensors --out raw.weights.safetensors
cmp -s ema.weights.safetensors raw.weights.safetensors && fail "export --ema wrote the raw weights"
run 1 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors --ema
expect err.txt "holds no moving average of the weights (trained without --ema-decay)"
run 1 "$STOKE" train $T --model cnn --epochs 3 --out r1 --resume --ema-decay 0.9
expect err.txt "holds no moving average of the weights"
run 2 "$STOKE" train $T --model cnn --out bad --monitor ema_val_top1
expect err.txt "--monitor ema_val_top1: the moving average's figures need --ema-decay DECAY"
run 2 "$STOKE" train $T --model cnn --out bad --ema-decay 1
expect err.txt "--ema"
run 2 "$STOKE" train $T --model cnn --out bad --ema-warmup
expect err.txt "--ema-warmup needs --ema-decay DECAY"

# Batch transforms: erasing, mixup and cutmix on training batches only; the
# same run twice is the same (Philox by seed and step); bad values refused.
run 0 "$STOKE" train $T --model cnn --epochs 1 --out mix1 --label-smoothing 0.1 \
    --transform pad:4,crop:28,flip,erase:0.5,mixup:0.2,cutmix:1 --mix-prob 0.8
expect out.txt "transform pad:4,crop:28,flip,erase:0.5,mixup:0.2,cutmix:1"
run 0 "$STOKE" train $T --model cnn --epochs 1 --out mix2 --label-smoothing 0.1 \
    --transform pad:4,crop:28,flip,erase:0.5,mixup:0.2,cutmix:1 --mix-prob 0.8
cmp -s mix1/last.safetensors mix2/last.safetensors || fail "two runs with batch transforms differ"
run 0 "$STOKE" train $T --model cnn --epochs 1 --out mix3 --label-smoothing 0.1 \
    --transform pad:4,crop:28,flip
cmp -s mix1/last.safetensors mix3/last.safetensors && fail "the batch transforms changed nothing"
run 1 "$STOKE" train $T --model cnn --out bad --transform center:28,mixup:0
expect err.txt 'transform "mixup:0": expected mixup:ALPHA (0 < alpha <= 100)'
run 1 "$STOKE" train $T --model cnn --out bad --transform center:28,erase:1.5
expect err.txt 'transform "erase:1.5": probability must be in (0, 1]'
run 2 "$STOKE" train $T --model cnn --out bad --mix-prob 1.5
expect err.txt "--mix-prob"
run 1 "$STOKE" train $T --model cnn --out bad --val-transform center:28,cutmix:1
expect err.txt "erase, mixup and cutmix are for training batches; evaluation never applies them"
run 1 "$STOKE" eval --data tiny.stoke --checkpoint mix1/last.safetensors --transform center:28,erase
expect err.txt "evaluation never applies them"

# eval reads the checkpoint and agrees with the run's last validation.
run 0 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors --batch 8 --json
"$PYTHON3" - <<'PY' || fail "eval --json"
import json, csv
d = json.load(open("out.txt"))
assert set(("val_loss", "val_top1", "val_top5", "images")) <= set(d), d
assert d["images"] == 50, d
last = list(csv.DictReader(open("r1/metrics.csv")))[-1]
assert abs(float(last["val_top1"]) - d["val_top1"]) < 1e-6, (last, d)
PY
run 0 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors
expect out.txt "top-1"
cp out.txt named.txt
# the checkpoint as the argument, as export and predict take it: the same figures
run 0 "$STOKE" eval --data tiny.stoke r1/last.safetensors
sed 's/ ([0-9.]* s)$//' named.txt > a.txt
sed 's/ ([0-9.]* s)$//' out.txt > b.txt
cmp -s a.txt b.txt || fail "eval FILE differs from eval --checkpoint FILE: $(cat a.txt b.txt)"
run 2 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors r1/last.safetensors
expect err.txt "give it once"
run 2 "$STOKE" eval --data tiny.stoke r1/last.safetensors r1/best.safetensors
expect err.txt "one checkpoint"

# Per-class figures and the confusion matrix: the JSON's matrix, the CSV and
# the JSON file agree with one another and with top-1; bad names refused.
run 0 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors --per-class --json \
    --confusion cm.csv --confusion cm.json --confusion cm.png
"$PYTHON3" - <<'PY' || fail "eval --per-class / --confusion"
import csv, json
d = json.load(open("out.txt"))
m = d["confusion"]
assert len(m) == 10 and all(len(r) == 10 for r in m) and sum(map(sum, m)) == 50, m
right = sum(m[k][k] for k in range(10))
assert abs(100 * right / 50 - d["val_top1"]) < 1e-9, (right, d["val_top1"])
rows = list(csv.reader(open("cm.csv")))
assert rows[0][0] == "true\\predicted" and [[int(c) for c in r[1:]] for r in rows[1:]] == m, rows
f = json.load(open("cm.json"))
assert f["matrix"] == m and len(f["per_class"]) == 10
for k, pc in enumerate(d["per_class"]):
    assert pc["images"] == sum(m[k]), pc
    col = sum(m[j][k] for j in range(10))
    assert pc["precision"] is None if col == 0 else abs(pc["precision"] - m[k][k] / col) < 1e-6, pc
PY
head -c 8 cm.png | od -c | grep -q 'P   N   G' || fail "cm.png is not a PNG"
run 0 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors --per-class
expect out.txt "precision"
run 2 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors --confusion cm.txt
expect err.txt "--confusion cm.txt: the file name must end in .csv, .json or .png"
# refused before the evaluation (it used to fail only after it), exit 2
run 2 "$STOKE" eval --data tiny.stoke --checkpoint r1/last.safetensors --confusion no/such/dir/cm.csv
expect err.txt "--confusion no/such/dir/cm.csv: no folder no/such/dir: No such file or directory"
grep -q "(100%)" err.txt && fail "eval --confusion into a missing folder evaluated first"

# Resume: a 3-epoch run stopped after epoch 1, then resumed, equals 3 straight
# epochs bit for bit (the schedule, the optimizer state and the loader's order
# all continue).
for w in 1 2; do
    run 0 "$STOKE" train $T --model resnet8 --epochs 3 --workers $w --out straight$w
    run 0 "$STOKE" train $T --model resnet8 --epochs 3 --workers $w --out resumed$w --stop-after 1
    [ "$(wc -l < resumed$w/metrics.csv)" = 2 ] || fail "--stop-after 1 should run one epoch"
    echo "7,2,9.9,0.01" >>resumed$w/steps.csv   # a step of an epoch that did not finish
    run 0 "$STOKE" train $T --model resnet8 --epochs 3 --workers $w --out resumed$w --resume
    expect out.txt "(resumed)"
    "$PYTHON3" - "$STOKE_TESTS/python" straight$w resumed$w <<'PY' || fail "resume with $w workers is not bit-identical"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, ma = st_io.load(sys.argv[2] + "/last.safetensors")
b, mb = st_io.load(sys.argv[3] + "/last.safetensors")
assert a.keys() == b.keys()
for k in a:
    assert np.array_equal(a[k], b[k]), k
assert ma["epoch"] == mb["epoch"] == "3" and ma["step"] == mb["step"], (ma, mb)
PY
    [ "$(wc -l < resumed$w/metrics.csv)" = 4 ] || fail "resumed metrics.csv should have 3 rows"
    cmp -s straight$w/steps.csv resumed$w/steps.csv || fail "resumed steps.csv differs from straight"
    [ "$(ls resumed$w/events.out.tfevents.* | wc -l)" = 2 ] || fail "a resumed run adds an event file"
done
# The same with --order block (FFCV's quasi-random order, a function of the
# seed and epoch): resumed after epoch 1, bit for bit the straight run
run 0 "$STOKE" train $T --model resnet8 --epochs 2 --workers 2 --order block --out bstraight
run 0 "$STOKE" train $T --model resnet8 --epochs 2 --workers 2 --order block --out bresumed \
    --stop-after 1
run 0 "$STOKE" train $T --model resnet8 --epochs 2 --workers 2 --order block --out bresumed --resume
cmp -s bstraight/steps.csv bresumed/steps.csv || fail "--order block: resumed steps.csv differs"
cmp -s bstraight/steps.csv straight2/steps.csv && fail "--order block gave the random order's steps"
run 1 "$STOKE" train $T --model resnet8 --epochs 3 --workers 2 --out bresumed --resume
expect err.txt "was trained with --order block, not random"
run 2 "$STOKE" train $T --model resnet8 --epochs 1 --order spiral --out bad
expect err.txt "--order spiral: expected random, block or sequential"
# Workers do not change the result either.
cmp straight1/last.safetensors straight2/last.safetensors >/dev/null 2>&1 || \
"$PYTHON3" - "$STOKE_TESTS/python" <<'PY' || fail "1 and 2 workers train differently"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load("straight1/last.safetensors")
b, _ = st_io.load("straight2/last.safetensors")
for k in a:
    assert np.array_equal(a[k], b[k]), k
PY

# --init (transfer) and --freeze.
run 0 "$STOKE" train $T --model cnn --epochs 1 --init r1/last.safetensors --freeze conv1 --out r2
expect out.txt "parameters: 94,186 (93,898 trainable, 288 frozen)"
expect out.txt "  conv1      288 frozen"
expect out.txt "  fc         1,290 trainable"
run 1 "$STOKE" train $T --model mlp --epochs 1 --init r1/last.safetensors --out r3
expect err.txt "holds a cnn model, not mlp"
run 1 "$STOKE" train $T --model cnn --epochs 1 --freeze nothing --out r3
expect err.txt "--freeze nothing matches no parameter"

# Refusals before any step.
run 2 "$STOKE" train $T --model resnet51
expect err.txt "unknown"
run 2 "$STOKE" train --data tiny.stoke
expect err.txt "--model is required"
run 1 "$STOKE" train --data tiny.stoke --val jpeg.stoke --model mlp --epochs 1 --out r3
expect err.txt "--val jpeg.stoke has 3 classes"
run 1 "$STOKE" train --data tiny.stoke --model mlp --transform rrc:224,flip --out r3
expect err.txt "from 28x28 raw images"
if ! "$STOKE" devices | grep -q '^gpu [0-9]'; then  # (with a GPU: test_train_cuda.sh)
    run 1 "$STOKE" train $T --model mlp --device cuda --out r3
    expect err.txt "no CUDA device"
fi
run 2 env DNNL_MAX_CPU_ISA=AVX2 "$STOKE" train $T --model mlp --amp --out r3 # (test_amp.sh)
expect err.txt "--amp on the CPU runs in bf16 and needs bf16 instructions"
run 1 "$STOKE" train $T --model mlp --resume --out nowhere
expect err.txt "--resume"
run 2 "$STOKE" train $T --model mlp --optimizer adam --nesterov
run 2 "$STOKE" train $T --model mlp --lr fast
# A diverging run stops at the step, names it, and keeps the last good checkpoint.
run 0 "$STOKE" train $T --model mlp --epochs 1 --out r4
cp r4/last.safetensors good.safetensors
run 1 "$STOKE" train $T --model mlp --epochs 3 --lr 100 --schedule constant --out r4 --resume
expect err.txt "the loss is"
expect err.txt "at step"
cmp -s r4/last.safetensors good.safetensors || fail "a diverged run replaced the last good checkpoint"
# A NaN weight that ReLU hides from the loss (a unit of fc1) stops the run
# after the first step, naming the parameter.
"$PYTHON3" - <<PY || fail "making nan.safetensors"
import sys
sys.path.insert(0, "$STOKE_TESTS/python")
import numpy as np, st_io
t, meta = st_io.load("good.safetensors")
t = {k: v for k, v in t.items() if not k.startswith("optim.")}
w = t["fc1.weight"].copy()
w[0, :] = np.nan
t["fc1.weight"] = w
st_io.save("nan.safetensors", t, meta)
PY
run 1 "$STOKE" train $T --model mlp --epochs 1 --init nan.safetensors --out r5
expect err.txt "fc1.weight is not finite after step 1 (epoch 1): training diverged"

# eval: weights that give NaN logits are an error naming the checkpoint (a
# NaN never ranks above the label: it once read "top-1 100.00%"), in JSON too;
# metadata that does not match its tensors is refused before the model is built.
"$PYTHON3" - <<PY || fail "making eval's hostile checkpoints"
import sys
sys.path.insert(0, "$STOKE_TESTS/python")
import numpy as np, st_io
t, meta = st_io.load("good.safetensors")
t = {k: v for k, v in t.items() if not k.startswith("optim.")}
t["fc3.bias"] = np.full_like(t["fc3.bias"], np.nan)
st_io.save("allnan.safetensors", t, meta)
t, meta = st_io.load("good.safetensors")
meta = dict(meta, image_size="2048")
st_io.save("huge.safetensors", t, meta)
PY
for j in "" --json; do
    run 1 "$STOKE" eval --data tiny.stoke --checkpoint allnan.safetensors $j
    expect err.txt "stoke: allnan.safetensors: the logits of sample 0 are not finite (NaN): its weights give outputs that are not finite"
    grep -qi "nan\|100" out.txt && fail "eval $j printed a result for NaN weights"
done
run 1 /usr/bin/time -f "%M" "$STOKE" eval --data tiny.stoke --checkpoint huge.safetensors
expect err.txt "huge.safetensors: its metadata (in_channels 1, image_size 2048) gives fc1.weight dimension 1 the size 4194304, the tensor has 784"
[ "$(tail -1 err.txt)" -lt 500000 ] || fail "eval of a forged image_size took $(tail -1 err.txt) kB"

# Checkpoint metadata is input: bad values are named with the file, never
# blamed on flags the user did not give, never turned into negative steps.
"$PYTHON3" - <<PY || fail "making damaged-metadata checkpoints"
import sys, shutil, os
sys.path.insert(0, "$STOKE_TESTS/python")
import st_io
t, meta = st_io.load("r1/last.safetensors")
for name, key, value in (("neg", "step", "-5"), ("vt", "val_transform", "mlp"),
                         ("cls", "classes", "10x")):
    m = dict(meta)
    m[key] = value
    os.makedirs(name, exist_ok=True)
    st_io.save(name + "/last.safetensors", t, m)
PY
run 1 "$STOKE" train $T --model cnn --epochs 3 --out neg --resume
expect err.txt "neg/last.safetensors: damaged checkpoint metadata: \"step\" is \"-5\""
run 1 "$STOKE" eval --data tiny.stoke --checkpoint vt/last.safetensors
expect err.txt "vt/last.safetensors: its val_transform"
grep -q -- "--transform" err.txt && fail "a checkpoint's value blamed on --transform"
run 1 "$STOKE" eval --data tiny.stoke --checkpoint cls/last.safetensors
expect err.txt "\"classes\" is \"10x\""
# more forged metadata: a step the epochs cannot make (it resumed at lr 0 and
# exited 0), versions that only start with 1, no model name, a terminal
# escape in val_transform (it was echoed raw)
"$PYTHON3" - <<PY || fail "making forged checkpoints"
import sys, os
sys.path.insert(0, "$STOKE_TESTS/python")
import st_io
t, meta = st_io.load("r1/last.safetensors")
for name, key, value in (("bigstep", "step", str(2**61)), ("v1x", "format_version", "1x"),
                         ("vplus", "format_version", "+1"), ("noname", "model", ""),
                         ("esc", "val_transform", "center:28\x1b[31m")):
    m = dict(meta)
    m[key] = value
    os.makedirs(name, exist_ok=True)
    st_io.save(name + "/last.safetensors", t, m)
PY
run 1 "$STOKE" train $T --model cnn --epochs 3 --out bigstep --resume
expect err.txt "bigstep/last.safetensors: damaged checkpoint metadata: \"step\" is 2305843009213693952, but 2 epochs of 6 steps make 12"
for v in v1x vplus; do
    run 1 "$STOKE" eval --data tiny.stoke --checkpoint $v/last.safetensors
    expect err.txt "$v/last.safetensors: checkpoint format version '"
done
run 1 "$STOKE" eval --data tiny.stoke --checkpoint noname/last.safetensors
expect err.txt "stoke: noname/last.safetensors: its model '' is not one this Stoke knows"
run 1 "$STOKE" eval --data tiny.stoke --checkpoint esc/last.safetensors
expect err.txt "esc/last.safetensors: its val_transform 'center:28\\x1B[31m' is not printable text"
grep -q "$(printf '\033')" err.txt out.txt && fail "an escape byte from a checkpoint reached the terminal"
# a blank row in metrics.csv (the old reader took the next row's epoch)
cp -r r1 blank && printf '   \n' >> blank/metrics.csv && printf '2,12,0,0,0\n' >> blank/metrics.csv
run 1 "$STOKE" train $T --model cnn --epochs 3 --out blank --resume
expect err.txt "blank/metrics.csv: a row that is not epoch,step,...:"
# --freeze that leaves nothing to train is named at once
run 1 "$STOKE" train $T --model mlp --epochs 1 --freeze "" --out fz
expect err.txt "--freeze '': an empty prefix would freeze every parameter"
run 1 "$STOKE" train $T --model mlp --epochs 1 --freeze fc1 --freeze fc2 --freeze fc3 --out fz
expect err.txt "--freeze: every parameter of mlp is frozen; nothing would train"

# Long user strings are used whole, never cut: a transform of 300 characters
# whose size token comes last, and a deep --out path.
LONGTF=$(printf 'flip:0.5,%.0s' $(seq 1 34))center:28
DEEP=$(printf 'd%.0s' $(seq 1 200))/$(printf 'e%.0s' $(seq 1 200))/$(printf 'f%.0s' $(seq 1 200))
mkdir -p "$(dirname "$DEEP")"
run 0 "$STOKE" train $T --model mlp --epochs 1 --transform "$LONGTF" --out "$DEEP"
[ -f "$DEEP/last.safetensors" ] || fail "checkpoint under a long --out path"
expect out.txt "transform flip:0.5"
expect out.txt "center:28"
run 1 "$STOKE" eval --data jpeg.stoke --checkpoint r1/last.safetensors
expect err.txt "jpeg.stoke has 3 classes"
run 2 "$STOKE" eval --data tiny.stoke
run 0 "$STOKE" train --help
expect out.txt "--resume"
run 0 "$STOKE" help eval
expect out.txt "--checkpoint"

# One writer per run folder: a second run into it is refused (exit 1, the
# holder named) and the first one's folder stays its own; the lock goes with
# the process. (Two runs once left one's best with the other's last.)
TL="--data tiny.stoke --batch 8 --threads 1 --workers 1 --model mlp --transform center:28"
rm -f first.rc
("$STOKE" train $TL --epochs 100000 --out locked >/dev/null 2>first.err; echo $? >first.rc) &
i=0
while [ ! -f locked/last.safetensors ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
run 1 "$STOKE" train $TL --epochs 3 --out locked
expect err.txt "stoke: --out locked is in use by pid "
expect err.txt "train $TL --epochs 100000 --out locked); wait for that run to end, or choose another --out"
run 1 "$STOKE" train $TL --epochs 100000 --out locked --resume
expect err.txt "is in use by pid"
pkill -INT -f -- "--epochs 100000 --out locked" || fail "the first run is gone"
i=0
while [ ! -f first.rc ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
wait
[ "$(cat first.rc)" = 130 ] || fail "the interrupted run exited $(cat first.rc)"   # Ctrl-C: 130
expect first.err "interrupted"
[ -f locked/last.safetensors ] || fail "the interrupted run lost its checkpoint"
grep -q "in use" first.err && fail "the first run saw the second"
# a temporary left by a killed writer is removed once the lock is held
touch locked/last.safetensors.tmp.AbC123 locked/notes.tmp.AbC123
run 0 "$STOKE" train $TL --epochs 100000 --stop-after 1 --out locked --resume
expect err.txt "removed 1 temporary file left in locked by an earlier run that was killed"
[ -e locked/last.safetensors.tmp.AbC123 ] && fail "the stale temporary stayed"
[ -e locked/notes.tmp.AbC123 ] || fail "a file that is not a checkpoint temporary was removed"
# a file-size limit: the checkpoint write fails with EFBIG (not SIGXFSZ), no temporary left
(ulimit -f 200; "$STOKE" train $TL --epochs 1 --out fsz >out.txt 2>err.txt; echo $? >fsz.rc)
[ "$(cat fsz.rc)" = 1 ] || fail "train under ulimit -f exited $(cat fsz.rc)"
expect err.txt "last.safetensors: write failed: File too large"
ls fsz/*.tmp.* 2>/dev/null && fail "a failed write left its temporary"

# A used run folder is never silently overwritten: a second run into it is
# refused naming --resume and --overwrite; --overwrite clears the old run,
# event files included; without --out each run gets a fresh runs/MODEL-N.
run 0 "$STOKE" train $TL --epochs 1 --out used
run 1 "$STOKE" train $TL --epochs 1 --out used
expect err.txt "stoke: --out used already holds a run ("
expect err.txt "): continue it with --resume, or replace it with --overwrite"
old_events=$(ls used/events.out.tfevents.*)
sleep 1   # another second: another event file name
run 0 "$STOKE" train $TL --epochs 1 --out used --overwrite
expect err.txt "--overwrite: removed 5 files of the run in used"
[ -e "$old_events" ] && fail "--overwrite kept the old run's event file"
only_entries used 5
run 2 "$STOKE" train $TL --epochs 1 --out used --overwrite --resume
expect err.txt "--resume and --overwrite: choose one"
rm -rf runs
run 0 "$STOKE" train $TL --epochs 1
run 0 "$STOKE" train $TL --epochs 1
[ -f runs/mlp-1/last.safetensors ] && [ -f runs/mlp-2/last.safetensors ] || fail "runs/mlp-1 and runs/mlp-2"
expect out.txt "checkpoints in runs/mlp-2"
run 0 "$STOKE" train $TL --epochs 2 --resume
expect out.txt "(resumed)"
expect out.txt "checkpoints in runs/mlp-2"
# --out's parent folders are made (the README's quick start: --out runs/photos)
run 0 "$STOKE" train $TL --epochs 1 --out nested/a/run
[ -f nested/a/run/last.safetensors ] || fail "--out nested/a/run: no checkpoint"
# --monitor needs what it monitors
run 2 "$STOKE" train $TL --epochs 1 --out mon --monitor val_loss
expect err.txt "--monitor val_loss: needs --val (without it: train_loss or train_top1)"
run 2 "$STOKE" train $TL --epochs 1 --out mon --monitor accuracy
expect err.txt "--monitor accuracy: val_loss, val_top1, val_top5, train_loss, train_top1, ema_val_loss, ema_val_top1 or ema_val_top5"

# Real data: one epoch of the mlp on Fashion-MNIST learns (>= 75% test top-1).
FM=/usr/share/datasets/fashion-mnist
if [ -f "$FM/train-images-idx3-ubyte.gz" ]; then
    run 0 "$STOKE" pack --from idx --split train "$FM" fm-train.stoke
    run 0 "$STOKE" pack --from idx --split test "$FM" fm-test.stoke
    run 0 "$STOKE" train --data fm-train.stoke --val fm-test.stoke --model mlp --epochs 1 \
        --lr 0.1 --wd 0 --schedule constant --transform center:28 --out fm --json
    "$PYTHON3" -c 'import json,sys; d=json.load(open("out.txt")); sys.exit(0 if d["val_top1"] >= 75 else 1)' \
        || fail "mlp on Fashion-MNIST: $(cat out.txt)"
    # Early stopping on an overfitting run: 500 training images, validated on
    # the 10,000 of the test set; it stops 3 epochs after its best, ends with
    # the best epoch's weights (the summary's val_* are that epoch's row), and
    # stoke eval of best.safetensors gives the same figures.
    "$PYTHON3" - "$FM" <<'PY' || fail "making the 500-image subset"
import gzip, struct, sys
im = gzip.open(sys.argv[1] + "/train-images-idx3-ubyte.gz").read()
lb = gzip.open(sys.argv[1] + "/train-labels-idx1-ubyte.gz").read()
open("sub-images", "wb").write(struct.pack(">IIII", 2051, 500, 28, 28) + im[16:16 + 500 * 784])
open("sub-labels", "wb").write(struct.pack(">II", 2049, 500) + lb[8:8 + 500])
PY
    run 0 "$STOKE" pack --from idx sub-images sub-labels fm-sub.stoke
    run 0 "$STOKE" train --data fm-sub.stoke --val fm-test.stoke --model mlp --epochs 60 --batch 50 \
        --lr 0.1 --wd 0 --schedule constant --transform center:28 --early-stop 3 --restore-best \
        --out es --json
    cp out.txt es.json
    "$PYTHON3" - <<'PY' || fail "early stopping: $(cat es.json)"
import csv, json
d = json.load(open("es.json"))
rows = list(csv.DictReader(open("es/metrics.csv")))
assert d["stop_reason"] == "early_stop" and d["stopped_epoch"] < 60, d
assert d["stopped_epoch"] == d["best_epoch"] + 3 == len(rows), (d, len(rows))
best = rows[d["best_epoch"] - 1]
assert all(float(r["val_loss"]) > float(best["val_loss"]) for r in rows[d["best_epoch"]:]), rows
assert abs(d["val_loss"] - float(best["val_loss"])) < 1e-5 and d["val_top1"] == float(best["val_top1"]), (d, best)
assert d["monitor"] == "val_loss" and abs(d["best_value"] - d["val_loss"]) < 1e-6, d
PY
    expect err.txt "epoch 1/60"
    run 0 "$STOKE" eval --data fm-test.stoke --checkpoint es/best.safetensors --batch 50 --json
    "$PYTHON3" -c '
import json, sys
a, b = json.load(open("es.json")), json.load(open("out.txt"))
sys.exit(0 if (a["val_loss"], a["val_top1"], a["val_top5"]) == (b["val_loss"], b["val_top1"], b["val_top5"]) else 1)' \
        || fail "stoke eval differs from the best epoch: $(cat out.txt) against $(cat es.json)"
fi
# --norm (and a norm token in --transform): the checkpoint records it, and
# eval with it reproduces training's evaluation; other values change the run
run 0 "$STOKE" train $T --model mlp --epochs 1 --norm imagenet --out norm1 --json
VAL=$("$PYTHON3" -c 'import json; print("%.4f" % json.load(open("out.txt"))["val_loss"])')
run 0 "$STOKE" info norm1/last.safetensors
expect out.txt "mean 0.485000014,0.456,0.405999988, std 0.229000002,0.224000007,0.224999994"
run 0 "$STOKE" eval --data tiny.stoke --checkpoint norm1/last.safetensors
expect out.txt "loss $VAL"
run 0 "$STOKE" train $T --model mlp --epochs 1 --transform pad:4,crop:28,flip,norm:0.5/0.25 --out norm2
run 0 "$STOKE" info norm2/last.safetensors
expect out.txt "mean 0.5,0.5,0.5, std 0.25,0.25,0.25"
run 0 "$STOKE" train $T --model mlp --epochs 1 --norm 0.5,0.25 --out norm3
cmp -s norm2/steps.csv norm3/steps.csv || fail "--norm 0.5,0.25 and the token norm:0.5/0.25 trained differently"
run 1 "$STOKE" train $T --model mlp --epochs 1 --norm 0.5,0.25 --transform pad:4,crop:28,flip,norm:imagenet --out x
expect err.txt "--norm 0.5,0.25 and the norm token of --transform pad:4,crop:28,flip,norm:imagenet disagree"
run 1 "$STOKE" train $T --model mlp --epochs 1 --norm 0.1:0.2:0.3,1:1:1 --out x
expect err.txt "--norm 0.1:0.2:0.3,1:1:1: 3 means and stds for a 1-channel dataset"
run 1 "$STOKE" train $T --model mlp --epochs 1 --norm grey --out x
expect err.txt "--norm grey: expected dataset, imagenet or MEAN,STD"
run 1 "$STOKE" train $T --model mlp --epochs 1 --val-transform center:28,norm --out x
expect err.txt "drop the norm token: evaluation normalises as training did"
finish
