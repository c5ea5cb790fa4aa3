#!/bin/sh
# The flag tables (tools/flags.h): one parser for every command, its syntax,
# its messages and exit codes, and the help text it generates.
. "$STOKE_TESTS/cli/lib.sh"

# every command answers --help and `stoke help CMD` with the same text, exit 0
for c in pack info verify peek bench train eval devices; do
    run 0 "$STOKE" "$c" --help
    cp out.txt help1.txt
    run 0 "$STOKE" help "$c"
    cmp -s out.txt help1.txt || fail "$c: --help and 'stoke help $c' differ"
    expect out.txt "usage: stoke $c"
    run 2 "$STOKE" "$c" --frobnicate
    expect err.txt "stoke $c: unknown option '--frobnicate'"
    expect err.txt "Try 'stoke help $c'."
done

# did you mean: the nearest flag or name, never a far one
run 2 "$STOKE" train --data a --model mlp --bach 64
expect err.txt "unknown option '--bach' (did you mean --batch?)"
run 2 "$STOKE" train --data a -epochs 3
expect err.txt "unknown option '-epochs' (did you mean --epochs?)"
run 2 "$STOKE" bench --epoch 3 x.stoke
expect err.txt "unknown option '--epoch' (did you mean --epochs?)"
run 2 "$STOKE" pack --wrokers 2 a b
expect err.txt "unknown option '--wrokers' (did you mean --workers?)"
run 2 "$STOKE" train --data a --model resnet19
expect err.txt "--model resnet19: unknown (did you mean resnet18?"
run 2 "$STOKE" train --data a --model vgg
expect err.txt "--model vgg: unknown (known: mlp, cnn, resnet8, resnet18, resnet34, resnet50, mobilenet_v2, efficientnet_b0, mobilenet_v3_small, mobilenet_v3_large, convnext_tiny, regnet_y_400mf, vit_b_16, vit_tiny)"
run 2 "$STOKE" info --frobnicate x.stoke
grep -q "did you mean" err.txt && fail "a suggestion for --frobnicate"

# shared flags: one range and one message everywhere
for c in pack verify bench train eval; do
    run 2 "$STOKE" "$c" --workers 0 a b
    expect err.txt "--workers 0: expected an integer in 1..1024"
done
run 2 "$STOKE" train --data a --model mlp --threads 2000
expect err.txt "--threads 2000: expected an integer in 1..1024"
run 2 "$STOKE" eval --data a --checkpoint b --threads x
expect err.txt "--threads x: expected an integer in 1..1024"
run 2 "$STOKE" eval --data a --checkpoint b --device tpu
expect err.txt "--device tpu: expected cpu, cuda or cuda:N"

# syntax: --flag=value, a missing value, a switch given a value, "--"
run 2 "$STOKE" bench --batch=0 x.stoke
expect err.txt "--batch 0: expected an integer in 1..1048576"
run 2 "$STOKE" train --data a --model mlp --batch
expect err.txt "--batch needs a value (B)"
run 2 "$STOKE" info --json=yes x.stoke
expect err.txt "--json takes no value"
run 2 "$STOKE" info -x x.stoke
expect err.txt "unknown option '-x'"
run 1 "$STOKE" info -- --json
expect err.txt "--json"   # after "--" a path, not a flag: opening it fails
run 2 "$STOKE" train --data a --model mlp --lr nan
expect err.txt "--lr nan: expected a number in 0..100"
run 2 "$STOKE" train --data a --model mlp --optimizer lbfgs
expect err.txt "--optimizer lbfgs: expected sgd, adam or adamw"
run 2 "$STOKE" pack --from zip a b
expect err.txt "--from zip: expected imagefolder, list, idx or cifar10"
i=0 f=""
while [ $i -lt 33 ]; do f="$f --freeze p$i"; i=$((i + 1)); done
run 2 "$STOKE" train --data a --model mlp $f
expect err.txt "at most 32 --freeze values"

# the names users know: timm's aliases, short options (alone, joined to
# their value, switches together), --no-X for a switch, a former name with a
# warning; each sets what the flag it aliases sets (--print-config shows it)
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
P="train --data tiny.stoke --model mlp --print-config"
# shellcheck disable=SC2086
run 0 "$STOKE" $P -b 64 --weight-decay 0.01 --opt adamw --sched step -j3 \
    --initial-checkpoint x.safetensors --smoothing 0.1 --clip-grad 2 --model-ema-decay 0.99 \
    --nesterov --no-nesterov -o runs/x --cache-mb 4
for line in 'batch = 64' 'wd = 0.01' 'optimizer = "adamw"' 'schedule = "step"' 'workers = 3' \
    'init = "x.safetensors"' 'label-smoothing = 0.1' 'clip-grad-norm = 2' 'ema-decay = 0.99' \
    'nesterov = false' 'out = "runs/x"' 'cache-mib = 4'; do
    grep -qxF "$line" out.txt || fail "--print-config lacks '$line'"
done
expect err.txt "warning: --cache-mb is now --cache-mib (the old name still works)"
# one meaning per name: --ema is eval's and export's switch (the average's
# weights); train's decay is --ema-decay, its old --ema DECAY still works
# shellcheck disable=SC2086
run 0 "$STOKE" $P --ema 0.9
grep -qxF 'ema-decay = 0.9' out.txt || fail "--ema 0.9 did not set --ema-decay"
expect err.txt "--ema is now --ema-decay"
# shellcheck disable=SC2086
run 0 "$STOKE" $P --batch-size=32 -qv
grep -qxF 'batch = 32' out.txt || fail "--batch-size=32 did not set batch"
# shellcheck disable=SC2086
run 2 "$STOKE" $P --no-batch
expect err.txt "unknown option '--no-batch'"
# shellcheck disable=SC2086
run 2 "$STOKE" $P --no-nesterov=yes
expect err.txt "--no-nesterov takes no value"
# shellcheck disable=SC2086
run 2 "$STOKE" $P -x
expect err.txt "unknown option '-x' (long options start with --)"
# shellcheck disable=SC2086
run 2 "$STOKE" $P -b
expect err.txt "--batch needs a value (B)"
run 0 "$STOKE" train --help
expect out.txt "  -b, --batch B"
expect out.txt "also --batch-size"
expect out.txt "  -q, --quiet"
run 0 "$STOKE" bench --dtype f32 --epochs 1 -b 10 --output u8 tiny.stoke
expect err.txt "--output is now --dtype"
# -q: no progress bar, no notes; the results stay
STOKE_PROGRESS=plain run 0 "$STOKE" bench -q --epochs 1 -b 10 tiny.stoke
[ -s out.txt ] || fail "bench -q printed no result"
grep -q "bench:" err.txt && fail "bench -q drew its progress bar"

# --image-size (timm's --img-size): the default transforms at another size
run 0 "$STOKE" train --data tiny.stoke --val tiny.stoke --model cnn --epochs 1 -b 10 \
    --img-size 20 --no-tensorboard -o sized
expect out.txt "transform rrc:20,flip"
run 0 "$STOKE" info sized/last.safetensors
expect out.txt "center:20"
run 1 "$STOKE" train --data tiny.stoke --model cnn --epochs 1 --image-size 32 -o big
expect err.txt "--image-size 32: tiny.stoke holds raw images of side 28"
run 2 "$STOKE" train --data tiny.stoke --model cnn --image-size 20 --transform center:28
expect err.txt "--image-size 20 sizes the default transform; --transform center:28 gives its own"

# timm's --resume PATH: the run's folder or its last.safetensors names the run
R="train --data tiny.stoke --model mlp --epochs 3 -b 10 --no-tensorboard"
# shellcheck disable=SC2086
run 0 "$STOKE" $R -o rr --stop-after 1
# shellcheck disable=SC2086
run 0 "$STOKE" $R --resume rr/last.safetensors --stop-after 1
# shellcheck disable=SC2086
run 0 "$STOKE" $R --resume rr/
[ "$(wc -l < rr/metrics.csv)" = 4 ] || fail "--resume PATH: rr/metrics.csv has not 3 epochs"
# shellcheck disable=SC2086
run 2 "$STOKE" $R --resume rr/best.safetensors
expect err.txt "a run continues from its last.safetensors"
# shellcheck disable=SC2086
run 2 "$STOKE" $R --resume rr -o elsewhere
expect err.txt "--resume rr is the run in rr, not --out elsewhere: give one"

# the dataset and the checkpoint by name wherever they are an argument
run 0 "$STOKE" info --data tiny.stoke --json
expect out.txt '"records": 50'
run 0 "$STOKE" verify --data tiny.stoke
run 2 "$STOKE" info --data tiny.stoke tiny.stoke
expect err.txt "--data tiny.stoke and the argument 'tiny.stoke': give it once"
run 2 "$STOKE" info --data tiny.stoke --checkpoint a.safetensors
expect err.txt "--data and --checkpoint name the same argument: give one"
run 0 "$STOKE" export --help
expect out.txt "  --checkpoint PATH"

# the transform grammar has its own help page; the overview names it and 130
run 0 "$STOKE" help transforms
expect out.txt "rrc:SIZE[:SMIN:SMAX]"
expect out.txt "mixup:ALPHA"
run 0 "$STOKE" help
expect out.txt "stoke help transforms"
expect out.txt "130 interrupted"
expect out.txt "-q, --quiet"

# positional arguments: counted, named
run 2 "$STOKE" info
expect err.txt "expected one DATA.stoke"
run 2 "$STOKE" devices extra
expect err.txt "unexpected argument 'extra'"
run 2 "$STOKE" pack a
expect err.txt "expected SRC OUT.stoke"
finish
