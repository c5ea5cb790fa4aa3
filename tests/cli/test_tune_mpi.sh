#!/bin/sh
# stoke tune on 2 ranks under mpirun: the ranks share each cohort's trials,
# rank 0 schedules with every rank's results and writes the sweep's files;
# trials.csv and every trial's metrics.csv equal a one-process sweep's with
# the same seed. A rank with other flags is refused before anything is
# written.
. "$STOKE_TESTS/cli/lib.sh"
MPIRUN=${MPIEXEC:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1 || [ "${STOKE_HAVE_MPI:-ON}" != ON ]; then
    echo "skipped: no MPI in this build"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="$MPIRUN -np 2 --oversubscribe"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
D="--data tiny.stoke --val tiny.stoke --model mlp --batch 8 --workers 1 --threads 1 --no-tensorboard"
SPACE='lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.99) wd=choice(0,1e-4)'
for sched in asha median; do
    rm -rf one two
    # shellcheck disable=SC2086
    run 0 "$STOKE" tune $D --space "$SPACE" --samples 7 --epochs 4 --scheduler $sched --reduction 2 \
        --grace 1 --min-samples 2 --concurrent 3 --seed 5 --out one
    # shellcheck disable=SC2086
    run 0 $MPI "$STOKE" tune $D --space "$SPACE" --samples 7 --epochs 4 --scheduler $sched \
        --reduction 2 --grace 1 --min-samples 2 --concurrent 3 --seed 5 --out two
    [ "$(grep -c '^trial ' out.txt)" = 7 ] || fail "$sched: rank 0 alone should print each trial's end once"
    cut -d, -f1-8,10- one/trials.csv > a.txt
    cut -d, -f1-8,10- two/trials.csv > b.txt
    cmp -s a.txt b.txt || { fail "$sched: 2 ranks, another trials.csv"; diff a.txt b.txt >&2; }
    for m in one/trials/*/metrics.csv; do
        cut -d, -f1-8 "$m" > a.txt
        cut -d, -f1-8 "two/${m#one/}" > b.txt
        cmp -s a.txt b.txt || fail "$sched: ${m#one/} differs on 2 ranks"
    done
done
grep -q ',STOPPED@' one/trials.csv || fail "the scheduler stopped no trial"
# PBT on 2 ranks: the owners save and load through DIR (every save of a
# round is written before any load); the same clones, the same numbers
PSPACE='lr=loguniform(1e-3,0.3) momentum=uniform(0.8,0.95)'
rm -rf one two
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$PSPACE" --samples 6 --epochs 5 --scheduler pbt --concurrent 6 \
    --seed 2 --out one
# shellcheck disable=SC2086
run 0 $MPI "$STOKE" tune $D --space "$PSPACE" --samples 6 --epochs 5 --scheduler pbt --concurrent 6 \
    --seed 2 --out two
cut -d, -f1-7,9- one/trials.csv > a.txt
cut -d, -f1-7,9- two/trials.csv > b.txt
cmp -s a.txt b.txt || { fail "pbt: 2 ranks, another trials.csv"; diff a.txt b.txt >&2; }
n=0
for p in one/trials/*/pbt.csv; do
    n=$((n + 1))
    cmp -s "$p" "two/${p#one/}" || fail "pbt: ${p#one/} differs on 2 ranks"
done
[ "$n" -gt 0 ] || fail "pbt: no trial saved or cloned"
# a rank with other flags: refused on every rank, nothing written
# shellcheck disable=SC2086
run 1 $MPIRUN -np 1 "$STOKE" tune $D --space 'lr=uniform(0.01,0.1)' --out bad : \
    -np 1 "$STOKE" tune $D --space 'lr=uniform(0.01,0.2)' --out bad
expect err.txt "rank 1 was given other stoke tune flags than rank 0"
[ -e bad ] && fail "a refused sweep wrote bad/"
# a space over the data flags: the groups of a cohort (one stream each) run
# one after another on every rank, each rank its share of each group (none
# too); on 2 and on 3 ranks the trials.csv of one process
DSPACE="lr=loguniform(1e-3,0.3) batch=choice(8,16) transform=choice(center:28,'pad:2,crop:28')"
DD="--data tiny.stoke --val tiny.stoke --model mlp --workers 1 --threads 1 --no-tensorboard"
for np in 1 2 3; do
    # shellcheck disable=SC2086
    run 0 $MPIRUN -np $np --oversubscribe "$STOKE" tune $DD --space "$DSPACE" --samples 7 --epochs 3 \
        --scheduler asha --reduction 2 --concurrent 4 --seed 5 --out "d$np"
done
"$PYTHON3" - <<'PY' || fail "a space over batch and transform: another trials.csv on 2 or 3 ranks"
import csv
def rows(d):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(open(d + "/trials.csv"))]
one = rows("d1")
assert len({r["batch"] + r["transform"] for r in one}) > 1, one
assert rows("d2") == one and rows("d3") == one
PY
# stopped on 2 ranks (--stop-after, as a kill there would), resumed on 2
# ranks, then on one process: the trials.csv of an uninterrupted sweep
# (each rank logs its own results; the resume orders them as the scheduler
# took them), for ASHA and for PBT
rm -rf one
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$SPACE" --samples 7 --epochs 4 --scheduler asha --reduction 2 \
    --concurrent 3 --seed 5 --out one
cut -d, -f1-8,10- one/trials.csv | sed 's|--out [^ ]*||' > a.txt
for k in 2 7; do
    rm -rf r
    # shellcheck disable=SC2086
    run 0 $MPI "$STOKE" tune $D --space "$SPACE" --samples 7 --epochs 4 --scheduler asha \
        --reduction 2 --concurrent 3 --seed 5 --out r --stop-after "$k"
    [ -e r/results.rank1.log ] || fail "rank 1 kept no results.rank1.log"
    run 0 $MPI "$STOKE" tune --resume --out r --stop-after 3
    run 0 "$STOKE" tune --resume --out r
    cut -d, -f1-8,10- r/trials.csv | sed 's|--out [^ ]*||' > b.txt
    cmp -s a.txt b.txt || { fail "asha stopped after $k on 2 ranks: another trials.csv"; diff a.txt b.txt >&2; }
done
rm -rf one r
# shellcheck disable=SC2086
run 0 "$STOKE" tune $D --space "$PSPACE" --samples 6 --epochs 5 --scheduler pbt --concurrent 6 \
    --seed 2 --out one
# shellcheck disable=SC2086
run 0 $MPI "$STOKE" tune $D --space "$PSPACE" --samples 6 --epochs 5 --scheduler pbt --concurrent 6 \
    --seed 2 --out r --stop-after 9
run 0 $MPI "$STOKE" tune --resume --out r
cut -d, -f1-7,9- one/trials.csv > a.txt
cut -d, -f1-7,9- r/trials.csv > b.txt
cmp -s a.txt b.txt || { fail "pbt stopped on 2 ranks and resumed: another trials.csv"; diff a.txt b.txt >&2; }
for p in one/trials/*/pbt.csv; do
    cmp -s "$p" "r/${p#one/}" || fail "pbt resumed on 2 ranks: ${p#one/} differs"
done
finish
