#!/bin/sh
# stoke tune under hostile use (issue 48): a resume with many more flags, a
# resumed copy of a sweep, a second process on a sweep that runs, the
# default --out resumed as printed, grids past the trial limit, several
# --config files, PBT's explore past a flag's range, values with newlines,
# an --out too long for the trials' folders.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
D="--data $WORK/tiny.stoke --model mlp --batch 8 --workers 2 --no-tensorboard"
SPACE='lr=grid(0.01,0.05) momentum=grid(0.8,0.9)'
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --epochs 2 --concurrent 2 --seed 1 --out full
strip() { cut -d, -f1-7,9- "$1" | sed 's|--out [^ ]*||'; }
strip full/trials.csv > want.txt

# a copy of a stopped sweep resumes in the copy; the original is untouched
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --epochs 2 --concurrent 2 --seed 1 --out orig --stop-after 2
cp -r orig copy
(cd orig && find . -type f | sort | xargs md5sum) > orig.sums
run 0 "$STOKE" tune --resume --out copy
expect out.txt "into copy (resumed)"
(cd orig && find . -type f | sort | xargs md5sum) > orig.after
cmp -s orig.sums orig.after || fail "resuming a copy changed the original sweep"
strip copy/trials.csv > got.txt
cmp -s want.txt got.txt || { fail "the resumed copy: another trials.csv"; diff want.txt got.txt >&2; }
[ -e copy/trials/0003/metrics.csv ] || fail "the copy's last trial ran elsewhere"
run 0 "$STOKE" tune --resume --out orig
strip orig/trials.csv > got.txt
cmp -s want.txt got.txt || fail "the original, resumed after its copy: another trials.csv"

# a resume with many flags of its own (each --json once more)
many=""
for _ in $(seq 300); do many="$many --json"; done
# shellcheck disable=SC2086
run 0 "$STOKE" tune --resume --out copy $many
expect out.txt '"trials": 4'

# the sweep's folder is locked while a stoke tune runs on it: a second one
# (or a rank of a killed job still alive, holding its share) is refused
lock_then() { # lock_then MODE DIR: hold DIR's lock in the background until 'stop' exists
    flock "$1" "$2" sh -c 'touch held; while [ ! -e stop ]; do sleep 0.1; done' &
    i=0
    while [ ! -e held ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
rm -rf busy held stop
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --epochs 2 --seed 1 --out busy --stop-after 1
lock_then -x busy
run 1 "$STOKE" tune --resume --out busy
expect err.txt "stoke: --out: busy is in use by pid"
touch stop; wait; rm -f held stop
lock_then -s busy/trials
run 1 "$STOKE" tune --resume --out busy
expect err.txt "stoke: --out: busy/trials is in use by pid"
touch stop; wait; rm -f held stop
run 0 "$STOKE" tune --resume --out busy
expect out.txt "(resumed)"
# two processes for real: the second is refused while the first runs
rm -rf busy2
# shellcheck disable=SC2086
"$STOKE" tune $D --space 'lr=grid(0.01,0.02,0.03,0.04)' --epochs 30 --concurrent 1 --seed 1 \
    --out busy2 > first.txt 2>&1 &
first=$!
i=0
while [ ! -e busy2/trials/0000 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
run 1 "$STOKE" tune --resume --out busy2
expect err.txt "busy2 is in use by pid $first"
kill -INT "$first"; wait "$first"
[ ! -e busy2/trials.csv ] || ! grep -q ERROR busy2/trials.csv || fail "the refused resume left ERROR trials"

# the default --out: the printed command resumes that same sweep
mkdir dflt
cd dflt || exit 1
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --epochs 2 --concurrent 2 --seed 1 --stop-after 2
expect err.txt "continue with: stoke tune --resume --out runs/tune-1"
run 0 "$STOKE" tune --resume --out runs/tune-1
expect out.txt "into runs/tune-1 (resumed)"
[ ! -e runs/tune-2 ] || fail "the printed resume command made another sweep"
strip runs/tune-1/trials.csv > got.txt
cmp -s ../want.txt got.txt || fail "the default --out, resumed: another trials.csv"
cd .. || exit 1

# more trials than a sweep holds: refused before anything is allocated
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space 'lr=grid(0.01,0.02,0.03)' --samples 5000 --out big
expect err.txt "--samples 5000 times the grid's 3 points is more than 10000 trials"
[ ! -e big ] || fail "a refused sweep wrote big/"
run 2 "$STOKE" tune $D --samples 20000 --space 'lr=uniform(0.01,0.1)' --out big
expect err.txt "--samples 20000: expected an integer in 1..10000"

# several --config files: each read, a later one's flag after an earlier's
cat > a.json <<EOF
{"data": "$WORK/tiny.stoke", "model": "mlp", "batch": 8, "workers": 2, "no-tensorboard": true,
 "space": "lr=grid(0.01,0.05)", "epochs": 1, "samples": 1}
EOF
echo '{"samples": 2}' > b.json
run 0 "$STOKE" tune --config a.json --config b.json --json --out cfg
expect out.txt '"trials": 4'
run 0 "$STOKE" tune --config b.json --config=a.json --json --out cfg2
expect out.txt '"trials": 2'

# PBT's explore: label smoothing perturbed past 1 is clamped into its range
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space 'label-smoothing=uniform(0.95,0.99)' --scheduler pbt --samples 4 \
    --concurrent 4 --epochs 8 --resample-probability 0 --seed 4 --out pbt
grep -q ERROR pbt/trials.csv && fail "PBT's explore ended a trial ERROR: $(grep ERROR pbt/trials.csv)"
grep -q ',cloned,.*label-smoothing=0.999' pbt/trials/*/pbt.csv ||
    fail "no clone's label smoothing was clamped to 0.999 (the test no longer reaches the bound)"

# a value holding a newline (a multi-line --space) round-trips through sweep.txt
NL='
'
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "lr=grid(0.01,0.05)${NL}momentum=grid(0.8,0.9)" --epochs 2 \
    --concurrent 2 --seed 1 --out nl --stop-after 2
run 0 "$STOKE" tune --resume --out nl
strip nl/trials.csv > got.txt
cmp -s want.txt got.txt || { fail "a multi-line --space, resumed: another trials.csv"; diff want.txt got.txt >&2; }
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "lr=grid(0.01,0.05)${NL}momentum=grid(0.8,0.9)" --epochs 2 \
    --concurrent 2 --seed 1 --out nl --resume
expect out.txt "(resumed)"

# an --out too long for the trials' folders: refused, not cut short
long=$(printf 'd%.0s' $(seq 1015))
# shellcheck disable=SC2086
run 2 "$STOKE" tune $D --space "$SPACE" --out "$long"
expect err.txt "--out is 1015 bytes long: a sweep's folder name may be at most 1000"
finish
