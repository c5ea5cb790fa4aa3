#!/bin/sh
# stoke tune on the fixtures: a sweep with ASHA writes trials.csv, best.json,
# best.safetensors and each trial's run; the same seed gives the same
# trials.csv; a trial's numbers do not depend on its neighbours (one at a
# time gives the same trials.csv as three side by side); each trial's
# command reproduces its metrics.csv; a diverging trial ends as ERROR and
# the sweep goes on; bad specs are usage errors naming the key.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
D="--data tiny.stoke --val tiny.stoke --model mlp --batch 8 --workers 2 --no-tensorboard"
SPACE='lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.99) wd=choice(0,1e-4)'
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --samples 6 --epochs 4 --scheduler asha --reduction 2 \
    --concurrent 3 --seed 5 --out s1
expect out.txt "tune: 6 trials, 3 side by side on one stream, asha, val_top1 (max)"
expect out.txt "best: trial "
[ "$(wc -l < s1/trials.csv)" = 7 ] || fail "trials.csv: $(wc -l < s1/trials.csv) lines"
expect s1/trials.csv "trial,status,lr,momentum,wd,best_val_top1,best_epoch,epochs_run,seconds,error,command"
grep -q ',STOPPED@' s1/trials.csv || fail "ASHA stopped no trial"
grep -q ',COMPLETED,' s1/trials.csv || fail "no trial completed"
for f in best.json best.safetensors trials/0000/params.json trials/0000/metrics.csv \
         trials/0005/last.safetensors; do
    [ -e "s1/$f" ] || fail "not written: s1/$f"
done
"$PYTHON3" - <<'PY' || fail "best.json, params.json, trials.csv"
import csv, json
best = json.load(open("s1/best.json"))
rows = list(csv.DictReader(open("s1/trials.csv")))
top = max(rows, key=lambda r: float(r["best_val_top1"] or "-1"))
assert best["trial"] == top["trial"], (best, top)
assert abs(best["metric"]["value"] - float(top["best_val_top1"])) < 1e-4
assert best["command"] == top["command"]
for r in rows:
    p = json.load(open("s1/trials/%s/params.json" % r["trial"]))
    assert p == {"lr": r["lr"], "momentum": r["momentum"], "wd": r["wd"]}, (p, r)
    assert 0.001 <= float(r["lr"]) <= 0.3 and r["wd"] in ("0", "1e-4")
    n = len(open("s1/trials/%s/metrics.csv" % r["trial"]).read().splitlines()) - 1
    assert n == int(r["epochs_run"]), (r, n)
    if r["status"].startswith("STOPPED@"):
        assert int(r["status"][8:]) == n
PY
# the same seed, one trial at a time: the same trials.csv (wall times aside)
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --samples 6 --epochs 4 --scheduler asha --reduction 2 \
    --concurrent 1 --seed 5 --out s2
strip() { cut -d, -f1-8,10- "$1" | sed 's|--out [^ ]*||'; }
strip s1/trials.csv > a.txt
strip s2/trials.csv > b.txt
cmp -s a.txt b.txt || { fail "trials.csv differs with --concurrent 1"; diff a.txt b.txt | head >&2; }
# interrupted anywhere (--stop-after N trial epochs, as a kill there would)
# and resumed, twice: the same trials.csv as the uninterrupted sweep
for k in 1 4 9; do
    rm -rf r
    # shellcheck disable=SC2086
    run 0 "$STOKE" tune $D --space "$SPACE" --samples 6 --epochs 4 --scheduler asha --reduction 2 \
        --concurrent 3 --seed 5 --out r --stop-after "$k"
    expect err.txt "continue with: stoke tune --resume --out r"
    run 0 "$STOKE" tune --resume --out r --stop-after 3
    # timm's form: --resume DIR is --resume --out DIR
    run 0 "$STOKE" tune --resume r
    expect out.txt "(resumed)"
    strip r/trials.csv > b.txt
    cmp -s a.txt b.txt || { fail "resumed after $k epochs: another trials.csv"; diff a.txt b.txt | head >&2; }
    cut -d, -f1-8 r/trials/0000/metrics.csv > m1.txt
    cut -d, -f1-8 s1/trials/0000/metrics.csv > m2.txt
    cmp -s m1.txt m2.txt || fail "resumed after $k epochs: trial 0000's metrics.csv differs"
done
run 2 "$STOKE" tune --resume=r --out elsewhere
expect err.txt "--resume r and --out elsewhere: name the sweep once"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space "$SPACE" --samples 7 --epochs 4 --scheduler asha --reduction 2 \
    --concurrent 3 --seed 5 --out r --resume
expect err.txt "--resume: '7' differs from the sweep in r (r/sweep.txt has '6')"
run 2 "$STOKE" tune --resume --out nowhere
expect err.txt "--resume: nowhere/sweep.txt: no such sweep"
# a trial's command reproduces its metrics.csv (every column but the timings)
cmd=$(sed -n 2p s1/trials.csv | sed 's/.*,stoke train /train /')
# shellcheck disable=SC2086
run 0 "$STOKE" $cmd --out repro
cut -d, -f1-8 repro/metrics.csv | head -n "$(wc -l < s1/trials/0000/metrics.csv)" > a.txt
cut -d, -f1-8 s1/trials/0000/metrics.csv > b.txt
cmp -s a.txt b.txt || { fail "the command does not reproduce trial 0000"; diff a.txt b.txt >&2; }
# a diverging trial: ERROR with the reason, the others go on
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space 'lr=grid(100,0.01)' --momentum 0.99 --epochs 2 --out s3
expect s3/trials.csv "0000,ERROR"
expect s3/trials.csv "training diverged"
expect s3/trials.csv "0001,COMPLETED"
# a space over the read order: one group (stream) per order; side by side
# the same trials.csv as one at a time
for k in 1 3; do
    # shellcheck disable=SC2086
    run 0 "$STOKE" tune $D --space 'lr=grid(0.01,0.05) order=grid(random,block)' --epochs 2 \
        --concurrent $k --seed 3 --out o$k
done
cut -d, -f1-7,9- o1/trials.csv | sed 's|--out [^ ]*||' > a.txt
cut -d, -f1-7,9- o3/trials.csv | sed 's|--out [^ ]*||' > b.txt
cmp -s a.txt b.txt || { fail "a space over --order: another trials.csv side by side"; diff a.txt b.txt >&2; }
# grid: the cartesian product, each point --samples times
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space 'lr=grid(0.01,0.02)' --space 'momentum=grid(0.8,0.9)' --samples 2 \
    --epochs 1 --json --out s4
expect out.txt '"trials": 8'
expect s4/trials.csv "0005,COMPLETED,0.01,0.9"
# PBT: the population at once; every clone loads the state its source kept
# at that epoch, bit for bit (pbt.csv's hashes of the state saved and loaded)
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space 'lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.95)' --samples 6 \
    --epochs 6 --scheduler pbt --concurrent 6 --seed 2 --out p1
"$PYTHON3" - <<'PY' || fail "PBT clones"
import csv, glob
saved, clones = {}, []
for f in sorted(glob.glob("p1/trials/*/pbt.csv")):
    me = f.split("/")[2]
    for r in csv.DictReader(open(f)):
        if r["event"] == "saved":
            saved[(me, r["trial_epoch"])] = r["state_fnv"]
        else:
            clones.append((me, r))
assert clones, "no trial cloned another"
for me, r in clones:
    assert r["trial"] != me
    assert saved[(r["trial"], r["trial_epoch"])] == r["state_fnv"], (me, r)
rows = list(csv.DictReader(open("p1/trials.csv")))
assert all(r["status"] == "COMPLETED" for r in rows), rows
cloned = {me for me, _ in clones}
for r in rows:
    assert (r["command"] == "") == (r["trial"] in cloned), r
PY
# PBT interrupted anywhere (before, inside and after a round's saves and
# loads) and resumed: the same trials.csv, pbt.csv and metrics.csv
pstrip() { cut -d, -f1-7,9- "$1" | sed 's|--out [^ ]*||'; }
pstrip p1/trials.csv > a.txt
for k in 3 6 11 20; do
    rm -rf r
    # shellcheck disable=SC2086
    run 0 "$STOKE" tune $D --space 'lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.95)' --samples 6 \
        --epochs 6 --scheduler pbt --concurrent 6 --seed 2 --out r --stop-after "$k"
    run 0 "$STOKE" tune --resume --out r --stop-after 4
    run 0 "$STOKE" tune --resume --out r
    pstrip r/trials.csv > b.txt
    cmp -s a.txt b.txt || { fail "pbt resumed after $k epochs: another trials.csv"; diff a.txt b.txt >&2; }
    for t in p1/trials/*; do
        id=${t#p1/trials/}
        [ ! -e "$t/pbt.csv" ] || cmp -s "$t/pbt.csv" "r/trials/$id/pbt.csv" ||
            fail "pbt resumed after $k epochs: trial $id's pbt.csv differs"
        cut -d, -f1-8 "$t/metrics.csv" > m1.txt
        cut -d, -f1-8 "r/trials/$id/metrics.csv" > m2.txt
        cmp -s m1.txt m2.txt || fail "pbt resumed after $k epochs: trial $id's metrics.csv differs"
    done
done
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'optimizer=choice(sgd,adam)' --scheduler pbt --samples 2 --out bad
expect err.txt "--scheduler pbt: --space optimizer: PBT changes values while a trial runs"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'lr=uniform(0.01,0.1)' --scheduler pbt --samples 6 --concurrent 4 --out bad
expect err.txt "the population (6 trials) runs at once: give --concurrent 6"
# TensorBoard's HParams dashboard: the experiment in the sweep's folder, a
# session per trial, read back by TensorBoard's own parsers (the test venv)
VPY=${STOKE_VENV_PYTHON:-}
if [ -n "$VPY" ] && "$VPY" -c "import tensorboard" 2>/dev/null; then
    # shellcheck disable=SC2086
    run 0 "$STOKE" tune --data tiny.stoke --val tiny.stoke --model mlp --batch 8 --workers 2 \
        --space 'lr=loguniform(1e-3,0.3) optimizer=choice(sgd,adam)' --samples 3 --epochs 2 \
        --scheduler asha --out h1
    "$VPY" "$STOKE_TESTS/python/check_tune_hparams.py" h1 > check.txt 2>&1 ||
        fail "HParams: $(cat check.txt)"
fi
# --config: the same sweep from a JSON object or a TOML file
cat > c.json <<'EOF'
{"data": "tiny.stoke", "val": "tiny.stoke", "model": "mlp", "batch": 8, "workers": 2,
 "no-tensorboard": true, "space": ["lr=loguniform(1e-3,0.3)", "momentum=uniform(0.8,0.99)"],
 "samples": 4, "epochs": 2, "scheduler": "asha", "seed": 3}
EOF
cat > c.toml <<'EOF'
# the same sweep
data = "tiny.stoke"
val = "tiny.stoke"
model = "mlp"
batch = 8
workers = 2
no-tensorboard = true
space = ["lr=loguniform(1e-3,0.3)", 'momentum=uniform(0.8,0.99)']
samples = 4
epochs = 2
scheduler = "asha"
seed = 3
EOF
run 0 "$STOKE" tune --data tiny.stoke --val tiny.stoke --model mlp --batch 8 --workers 2 \
    --no-tensorboard --space 'lr=loguniform(1e-3,0.3)' --space 'momentum=uniform(0.8,0.99)' \
    --samples 4 --epochs 2 --scheduler asha --seed 3 --out cl
run 0 "$STOKE" tune --config c.json --out cj
run 0 "$STOKE" tune --config c.toml --out ct
cut -d, -f1-7 cl/trials.csv > a.txt
for d in cj ct; do
    cut -d, -f1-7 $d/trials.csv > b.txt
    cmp -s a.txt b.txt || fail "--config ($d): another sweep than the flags'"
done
echo '{"data": "x", "bogus": 1}' > b.json
run 2 "$STOKE" tune --config b.json
expect err.txt "--config b.json line 1: 'bogus' is not a flag of stoke tune or stoke train"
printf 'data = "x"\n[table]\n' > b.toml
run 2 "$STOKE" tune --config b.toml
expect err.txt "--config b.toml line 2: a [table]: the flags are top-level keys"
echo '{"data": "x",' > c2.json
run 2 "$STOKE" tune --config c2.json
expect err.txt "--config c2.json line 2, column 0: string or '}' expected near end of file"
echo '{"data": "x", "data": "y"}' > d.json  # which one counts? neither
run 2 "$STOKE" tune --config d.json
expect err.txt "--config d.json line 1, column 20: duplicate object key near '\"data\"'"
run 2 "$STOKE" tune --config none.json
expect err.txt "--config none.json: "
# stoke plot of a sweep: each trial's metric, the best so far
run 0 "$STOKE" plot s1 --out sweep.svg
expect out.txt "plot: a sweep of 6 trials -> sweep.svg"
expect sweep.svg "val_top1 of each trial"
expect sweep.svg "best val_top1 so far"
# bad input: usage errors naming the key or flag, nothing written
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'lr=loguniform(0,1)' --out bad
expect err.txt "--space lr: loguniform needs bounds above 0"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'data=choice(a,b)' --out bad
expect err.txt "--space data: not a stoke train flag a trial can vary"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --lr 0.1 --space 'lr=uniform(0.1,0.2)' --out bad
expect err.txt "--space lr: also given as --lr"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'momentum=uniform(0.5,1.5)' --samples 20 --out bad
expect err.txt "stoke train refuses these values"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'lr=uniform(0.1,0.2)' --metric val_top9 --out bad
expect err.txt "--metric val_top9"
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'lr=uniform(0.1,0.2)' --resume --out bad
[ -e bad ] && fail "a refused sweep wrote bad/"
# shellcheck disable=SC2086
run 1 "$STOKE" tune $D --space 'lr=uniform(0.1,0.2)' --out s1
expect err.txt "--out s1 already holds something"
run 0 "$STOKE" help tune
expect out.txt "--scheduler"
finish
