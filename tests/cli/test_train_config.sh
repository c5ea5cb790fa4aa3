#!/bin/sh
# stoke train's settings from one table: --print-config writes every
# setting (defaults resolved) as TOML that --config reads back into the same
# run (identical metrics.csv); the command line overrides the file; JSON
# configs; unknown keys refused; --min-lr floors the cosine schedule.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
run 0 "$STOKE" pack --from idx "$FX/idx" tiny.stoke # 50 random 28x28 images, 10 classes
T="--data tiny.stoke --val tiny.stoke --batch 8 --threads 2 --workers 2 --no-tensorboard"
R="--model mlp --epochs 2 --lr 0.02 --min-lr 0.005 --wd 0.001 --transform center:28 --freeze fc1"

# --print-config: nothing trained, nothing written; every setting, resolved.
run 0 "$STOKE" train $T $R --print-config
cp out.txt cfg.toml
[ ! -e runs ] || fail "--print-config made a run folder"
expect cfg.toml 'lr = 0.02'
expect cfg.toml 'min-lr = 0.005'
expect cfg.toml 'momentum = 0.9'
expect cfg.toml 'monitor = "val_loss"'
expect cfg.toml 'freeze = ["fc1"]'
expect cfg.toml 'order = "random"'
expect cfg.toml '# optimisation'
if grep -q '^out = \|^config = \|^print-config = ' cfg.toml; then fail "cfg.toml names a run folder or itself"; fi

# The file read back is the same run: metrics.csv's numbers identical.
run 0 "$STOKE" train $T $R --out a
run 0 "$STOKE" train --config cfg.toml --out b
cut -d, -f1-8 a/metrics.csv >a.csv
cut -d, -f1-8 b/metrics.csv >b.csv
cmp -s a.csv b.csv || { fail "--config's run differs from the flags' run"; cat a.csv b.csv >&2; }
[ "$(wc -l <b.csv)" = 3 ] || fail "the config's run: 2 epochs expected"

# The command line wins over the file.
run 0 "$STOKE" train --config cfg.toml --epochs 1 --out c
[ "$(wc -l <c/metrics.csv)" = 2 ] || fail "--epochs 1 after --config: 1 epoch expected"

# --min-lr: the cosine ends at the floor (steps.csv's last lr), not at 0.
last_lr() { tail -n 1 "$1/steps.csv" | cut -d, -f4; }
run 0 "$STOKE" train $T --model mlp --epochs 2 --lr 0.02 --transform center:28 --out d
"$PYTHON3" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (a >= 0.005 - 1e-9 and a < 0.0055 and b < 0.001))" \
    "$(last_lr a)" "$(last_lr d)" || fail "--min-lr 0.005: last lr $(last_lr a) (without: $(last_lr d))"
run 2 "$STOKE" train $T --model mlp --lr 0.01 --min-lr 0.1
expect err.txt "--min-lr 0.1: above the peak --lr 0.01"

# The settings --resume must match (the table's STK_SET_RESUME) are checked
# from the checkpoint: the seed (the position's), the read order.
run 0 "$STOKE" train $T --model mlp --epochs 2 --stop-after 1 --seed 3 --out f
run 1 "$STOKE" train $T --model mlp --epochs 2 --out f --resume
expect err.txt "--resume: f/last.safetensors was trained with --seed 3, not 0"
run 1 "$STOKE" train $T --model mlp --epochs 2 --seed 3 --order sequential --out f --resume
expect err.txt "--resume: f/last.safetensors was trained with --order random, not sequential"
run 0 "$STOKE" train $T --model mlp --epochs 2 --seed 3 --out f --resume
[ "$(wc -l <f/metrics.csv)" = 3 ] || fail "the resumed run: 2 epochs expected"

# tune reads the same table: a space may vary --min-lr (STK_SET_TUNE), not
# --seed or --ema (the sweep's own, not per trial).
run 0 "$STOKE" tune --data tiny.stoke --val tiny.stoke --model mlp --batch 8 --workers 2 \
    --no-tensorboard --epochs 1 --space 'min-lr=choice(0.001)' --lr 0.01 --out s1
expect s1/trials.csv "min-lr"
expect s1/trials.csv "0.001"
run 2 "$STOKE" tune --data tiny.stoke --model mlp --space 'seed=choice(1,2)' --out s2
expect err.txt "--space seed: not a stoke train flag a trial can vary"
run 2 "$STOKE" tune --data tiny.stoke --model mlp --space 'lr=choice(0.1)' --ema 0.9 --out s2
expect err.txt "unknown option '--ema'"

# JSON; a key that is no flag, and --config inside a config, refused.
printf '{"data": "tiny.stoke", "model": "mlp", "epochs": 1, "batch": 8, "no-tensorboard": true, "freeze": ["fc1"]}' >c.json
run 0 "$STOKE" train --config c.json --out e
[ "$(wc -l <e/metrics.csv)" = 2 ] || fail "the JSON config's run: 1 epoch expected"
printf '{"model": "mlp", "bogus": 1}' >bad.json
run 2 "$STOKE" train --config bad.json --data tiny.stoke
expect err.txt "--config bad.json line 1: 'bogus' is not a flag of stoke train"
printf 'config = "cfg.toml"\n' >self.toml
run 2 "$STOKE" train --config self.toml --data tiny.stoke --model mlp
expect err.txt "'config' is not a flag of stoke train"
run 2 "$STOKE" train --config missing.toml
expect err.txt "--config missing.toml: cannot open"
finish
