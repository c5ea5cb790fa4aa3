#!/bin/sh
# stoke train on 2 ranks under mpirun (Open MPI; root and oversubscription
# allowed, as in CI containers): the same training as one process on the
# global batch, rank 0 alone writing, resume bit-identical, resume on other
# world sizes, sync batch norm, a rank with other flags refused on every rank,
# a stopped or killed rank stopping the job. Without MPI in the build: a multi-rank launch
# is refused, naming what to install.
. "$STOKE_TESTS/cli/lib.sh"
MPIRUN=${MPIEXEC:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
    echo "skipped: no mpirun"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="$MPIRUN -np 2 --oversubscribe"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 random 28x28 images
T="--data tiny.stoke --val tiny.stoke --threads 1 --workers 1 --model mlp --epochs 2 --transform center:28"

# weights RUN_A RUN_B: the largest difference between the f32 tensors of two
# runs' last checkpoints (weights, buffers, optimizer state), relative to
# 1 + the largest value of the tensor; 0 when bitwise equal
weights() {
    "$PYTHON3" - "$STOKE_TESTS/python" "$1/last.safetensors" "$2/last.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load(sys.argv[2])
b, _ = st_io.load(sys.argv[3])
assert a.keys() == b.keys(), "other tensors"
print(max(float(np.abs(a[k].astype(np.float64) - b[k]).max() / (1 + np.abs(a[k]).max()))
          for k in a if a[k].dtype.kind == "f"))
PY
}
# close RUN_A RUN_B TOL: the runs agree within TOL
close() {
    d=$(weights "$1" "$2") || { fail "$1 against $2: unreadable"; return; }
    awk -v d="$d" -v t="$3" 'BEGIN { exit !(d <= t) }' || fail "$1 against $2: $d > $3"
}
# apart RUN_A RUN_B TOL: the runs differ by more than TOL
apart() {
    d=$(weights "$1" "$2") || { fail "$1 against $2: unreadable"; return; }
    awk -v d="$d" -v t="$3" 'BEGIN { exit !(d > t) }' || fail "$1 against $2: only $d apart"
}

if [ "${STOKE_HAVE_MPI:-ON}" != ON ]; then
    run 1 $MPI "$STOKE" train $T --batch 8 --out r
    expect err.txt "started 2 ranks, but this build of Stoke has no MPI: install libopenmpi-dev"
    finish
fi

# 2 ranks x batch 8 against 1 process x batch 16: the same samples each step
run 0 "$STOKE" train $T --batch 16 --out one
cp out.txt one.txt
run 0 $MPI "$STOKE" train $T --batch 8 --out two
cp out.txt two.txt
expect two.txt "data-parallel: 2 ranks (Open MPI"
expect two.txt "global batch 16"
expect err.txt "MB of gradients all-reduced per step in 1 buckets"
only_entries two 5      # rank 0 alone writes: metrics.csv, steps.csv, events, last and best
# epoch lines agree (the mean loss and accuracy over both shards; validation on rank 0)
grep '^epoch' one.txt | sed 's/, [0-9]* images.*//' > a.txt
grep '^epoch' two.txt | sed 's/, [0-9]* images.*//' > b.txt
cmp -s a.txt b.txt || { fail "epoch lines differ"; cat a.txt b.txt >&2; }
[ "$(grep -c '^epoch' two.txt)" = 2 ] || fail "rank 1 printed epoch lines too"
close one two 1e-5   # summation order only: per-rank means, then their mean
# micro-batches under data parallelism: the all-reduce once the last
# micro-batch is through; mlp has no batch norm, so 2 x 8 in micro-batches
# of 4 trains as 1 x 16
run 0 $MPI "$STOKE" train $T --batch 8 --micro-batches 2 --out twomicro
expect out.txt "micro-batches: 2 a step, gradients accumulated"
close one twomicro 1e-5
# pipeline stages on ranks: 2 ranks = one pipeline of 2 stages trains as one
# process accumulating the same micro-batches (evaluated on rank 0 with the
# whole model, which every rank holds); it resumes on one process
run 0 "$STOKE" train $T --batch 8 --micro-batches 2 --out onemicro
run 0 $MPI "$STOKE" train $T --batch 8 --micro-batches 2 --pipeline 2 --split-after fc2 --out pipe
expect out.txt "pipelines on ranks: 2 ranks (Open MPI"
expect out.txt "= 1 pipeline x 2 stages (rank = pipeline x 2 + stage), batch 8 per pipeline, global batch 8"
expect out.txt "stage 0: flatten .. fc2 (4 units), stage 1: relu2 .. fc3 (2 units)"
close onemicro pipe 1e-5
run 0 $MPI "$STOKE" train $T --batch 8 --micro-batches 2 --pipeline 2 --split-after fc2 \
    --stop-after 1 --out pipe-resumed
run 0 "$STOKE" train $T --batch 8 --micro-batches 2 --out pipe-resumed --resume
expect out.txt "(resumed)"
close onemicro pipe-resumed 1e-5
# the same with a graph imported from ONNX, cut into its modules' units
cp "$STOKE_TESTS/data/onnx/fmnist_net.onnx" net.onnx
TO="--data tiny.stoke --threads 1 --workers 1 --model net.onnx --epochs 2 --transform center:28"
run 0 "$STOKE" train $TO --batch 8 --micro-batches 2 --out onnx-onemicro
run 0 $MPI "$STOKE" train $TO --batch 8 --micro-batches 2 --pipeline 2 --split-after bn1 --out onnx-pipe
expect out.txt "stage 0: conv1 .. bn1 (2 units), stage 1: conv2 .. fc (3 units)"
close onnx-onemicro onnx-pipe 1e-5
# 4 ranks = 2 pipelines x 2 stages: the parameters and optimizer state of 2
# data-parallel ranks with the same micro-batches (cnn: batch norm per
# micro-batch on both; running statistics averaged over the pipelines)
TC2="--data tiny.stoke --threads 1 --workers 1 --model cnn --epochs 1 --transform center:28 --batch 8 --micro-batches 2"
run 0 $MPI "$STOKE" train $TC2 --out dp-micro
run 0 $MPIRUN -np 4 --oversubscribe "$STOKE" train $TC2 --pipeline 2 --split-after relu2 --out pp-micro
expect out.txt "= 2 pipelines x 2 stages (rank = pipeline x 2 + stage), batch 8 per pipeline, global batch 16"
"$PYTHON3" - "$STOKE_TESTS/python" <<'PY' || fail "2 pipelines x 2 stages against 2 ranks"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load("dp-micro/last.safetensors")
b, _ = st_io.load("pp-micro/last.safetensors")
assert a.keys() == b.keys()
d = max(float(np.abs(a[k].astype(np.float64) - b[k]).max() / (1 + np.abs(a[k]).max()))
        for k in a if a[k].dtype.kind == "f" and "running" not in k)
assert d <= 1e-5, d
PY
run 1 $MPIRUN -np 3 --oversubscribe "$STOKE" train $T --batch 8 --micro-batches 2 --pipeline 2 \
    --split-after fc2 --out pipe3
expect err.txt "--pipeline 2 on 3 ranks: the ranks must be a multiple of the stages"
run 1 $MPI "$STOKE" train $T --batch 8 --micro-batches 2 --pipeline 2 --out pipe4
expect err.txt "--pipeline on ranks needs --split-after"

# shards (here a file twice: 100 records): 2 ranks draw from both, in the
# one global order, as one process does
S="--data tiny.stoke,tiny.stoke --val tiny.stoke --threads 1 --workers 1 --model mlp --epochs 1 --transform center:28"
run 0 "$STOKE" train $S --batch 16 --out sh1
run 0 $MPI "$STOKE" train $S --batch 8 --out sh2
expect out.txt "global batch 16"
close sh1 sh2 1e-5

# stop after epoch 1, resume on 2 ranks: bit-identical to straight through
run 0 $MPI "$STOKE" train $T --batch 8 --out split --stop-after 1
run 0 $MPI "$STOKE" train $T --batch 8 --out split --resume
expect out.txt "(resumed)"
close two split 0     # bit-identical

# resume with other world sizes: 2 ranks x 8, then 1 x 16, then 4 x 4 (50
# records: the 4 shards are uneven, padded by wrapping to equal length) give
# the run of 1 x 16 straight through: each epoch starts from its beginning,
# and a global batch of 16 holds the same samples on any number of ranks
T3="--data tiny.stoke --val tiny.stoke --threads 1 --workers 1 --model mlp --epochs 3 --transform center:28"
run 0 "$STOKE" train $T3 --batch 16 --out straight
run 0 $MPI "$STOKE" train $T3 --batch 8 --out chain --stop-after 1
run 0 "$STOKE" train $T3 --batch 16 --out chain --stop-after 1 --resume
expect out.txt "resume: the run was saved by 2 ranks x batch 8; epoch 2 starts from its beginning on 1 x 16 (scheduler at step 3)"
run 0 $MPIRUN -np 4 --oversubscribe "$STOKE" train $T3 --batch 4 --out chain --resume
expect out.txt "epoch 3 starts from its beginning on 4 x 4 (scheduler at step 6)"
cut -d, -f1-8 straight/metrics.csv > a.txt
cut -d, -f1-8 chain/metrics.csv > b.txt
cmp -s a.txt b.txt || { fail "the chained run's metrics differ"; cat a.txt b.txt >&2; }
# another global batch: allowed, and said
run 0 "$STOKE" train $T3 --batch 8 --out chain2 --stop-after 1
run 0 $MPI "$STOKE" train $T3 --batch 8 --out chain2 --resume
expect out.txt "resume: the global batch changes from 8 to 16"

# sync batch norm: cnn on 2 ranks x 8 with --sync-bn is cnn on 1 x 16; with
# per-rank statistics (the default) it is not. One step (16 images): the two
# differ in summation order only (~1e-7 relative a step, measured). Over more
# steps they may not stay close on any CPU: a ReLU input or max-pool pair
# within that rounding of a tie flips its gradient's route, which moves a
# conv weight's gradient by about one position of 16 x 28 x 28 (~1e-4, as
# seen on an AVX2 EPYC at step 8: 3.9e-7 after step 7, 1.7e-4 after step 8),
# and training amplifies it from there. So: the running statistics (a
# continuous function of the inputs: within 1e-5) and everything else after
# the step within 1e-3 (one such flip, not a missing synchronisation: per-rank
# statistics differ by ~1e-2, ~1e-3 in the running ones after a step).
"$PYTHON3" - "$STOKE_FIXTURES/idx" <<'PY' || fail "making the 16-image set"
import gzip, os, struct, sys
im = gzip.open(os.path.join(sys.argv[1], "train-images-idx3-ubyte.gz")).read()
lb = gzip.open(os.path.join(sys.argv[1], "train-labels-idx1-ubyte.gz")).read()
os.makedirs("idx16", exist_ok=True)
open("idx16/train-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, 16, 28, 28) + im[16:16 + 16 * 784])
open("idx16/train-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, 16) + lb[8:8 + 16])
PY
run 0 "$STOKE" pack --from idx idx16 t16.stoke
TC="--data t16.stoke --threads 1 --workers 1 --model cnn --epochs 1 --transform center:28"
run 0 "$STOKE" train $TC --batch 16 --out cnn1
run 0 $MPI "$STOKE" train $TC --batch 8 --out cnn2 --sync-bn
expect out.txt "global batch 16, batch norm synchronised"
run 0 $MPI "$STOKE" train $TC --batch 8 --out cnn2l
close straight chain 1e-5
close cnn1 cnn2 1e-3
# stats RUN_A RUN_B: the largest relative difference of the running statistics
stats() {
    "$PYTHON3" - "$STOKE_TESTS/python" "$1/last.safetensors" "$2/last.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load(sys.argv[2])
b, _ = st_io.load(sys.argv[3])
print(max(float(np.abs(a[k].astype(np.float64) - b[k]).max() / (1 + np.abs(a[k]).max()))
          for k in a if k.endswith(("running_mean", "running_var"))))
PY
}
d=$(stats cnn1 cnn2)
awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' || fail "sync batch norm: running statistics $d apart"
d=$(stats cnn1 cnn2l)
awk -v d="$d" 'BEGIN { exit !(d > 1e-4) }' || fail "per-rank batch norm: statistics only $d apart"

# early stopping decides alike on every rank (rank 0's evaluation is given
# to all): both ranks stop after the same epoch and the job exits 0
run 0 $MPI "$STOKE" train $T --batch 8 --epochs 20 --out es2 --early-stop 2 --monitor train_top1 \
    --mode min --json
expect out.txt '"stopped_epoch": 3, "best_epoch": 1'
expect out.txt '"stop_reason": "early_stop"'
run 0 $MPI "$STOKE" train $T --batch 8 --epochs 20 --out es3 --early-stop 1 --monitor val_top1 \
    --mode min --restore-best --json
expect out.txt '"stop_reason": "early_stop"'
# the moving average's evaluation (rank 0's) decides alike too
run 0 $MPI "$STOKE" train $T --batch 8 --epochs 20 --out es4 --early-stop 1 --ema-decay 0.9 \
    --monitor ema_val_loss --mode max --json
expect out.txt '"stopped_epoch": 2, "best_epoch": 1'
expect out.txt '"stop_reason": "early_stop"'

# On GPUs (a real one, or the STOKE_CUDA=EMULATE build's host emulation,
# with two emulated GPUs and tests/cuda_host's NCCL between the processes):
# each rank on its local GPU, gradients averaged by NCCL on the device, the
# same weights as one process on the whole batch
# (NCCL needs a GPU per rank: skipped on a machine with one real GPU)
export STOKE_HOST_CUDA_DEVICES=2
if [ "$("$STOKE" devices | grep -c '^gpu [0-9]')" -ge 2 ]; then
    run 0 "$STOKE" train $T --batch 16 --out gpu1 --device cuda
    run 0 $MPI "$STOKE" train $T --batch 8 --out gpu2 --device cuda
    expect err.txt "all-reduced per step in 1 buckets by NCCL"
    close gpu1 gpu2 1e-5
    NCCL_TESTED=1
fi

# a rank with other flags: refused on every rank before the first step
run 1 $MPIRUN --oversubscribe -np 1 "$STOKE" train $T --batch 8 --out bad : \
    -np 1 "$STOKE" train $T --batch 4 --out bad
expect err.txt "stoke: rank 0 of 2: rank 1 differs from rank 0: --batch 4 against 8"
[ -f bad/last.safetensors ] && fail "a refused job wrote a checkpoint"
# Every flag that changes what is computed or when ranks synchronise, the
# trainable set and the data's content: each rank names the first difference
# and leaves (exit 1), nothing written. (Differing --freeze once corrupted
# memory inside MPI_Allreduce: buckets of other sizes.)
run 0 "$STOKE" pack --from idx --shuffle --seed 1 "$STOKE_FIXTURES/idx" shuffled.stoke
# differ "FLAGS OF RANK 0" "FLAGS OF RANK 1" MESSAGE
differ() {
    rm -rf bad
    run 1 $MPIRUN --oversubscribe -np 1 "$STOKE" train $T --batch 8 --out bad $1 : \
        -np 1 "$STOKE" train $T --batch 8 --out bad $2
    expect err.txt "stoke: rank 0 of 2: rank 1 differs from rank 0: $3"
    expect err.txt "stoke: rank 1 of 2: rank 1 differs from rank 0: $3"
    [ -f bad/last.safetensors ] && fail "$1 / $2: a refused job wrote a checkpoint"
}
differ "--freeze fc1" "" "--freeze (none) against fc1"
differ "--wd 0" "--wd 0.1" "--wd 0.1 against 0"
differ "" "--transform pad:2,crop:28" "--transform pad:2,crop:28 against center:28"
differ "--schedule step" "" "--schedule cosine against step"
differ "" "--data shuffled.stoke" "--data (content fingerprint)"
differ "--stop-after 1" "" "--stop-after (none) against 1"
differ "--momentum 0.8" "" "--momentum 0.9 against 0.8"
differ "--label-smoothing 0.1" "" "--label-smoothing 0 against 0.1"
# settings the table added to the comparison (STK_SET_RANKS)
differ "" "--min-lr 0.001" "--min-lr 0.001 against 0"
differ "--order sequential" "" "--order random against sequential"
T1="--data tiny.stoke --threads 1 --workers 1 --model mlp --epochs 2 --transform center:28 --batch 8"
rm -rf bad
run 1 $MPIRUN --oversubscribe -np 1 "$STOKE" train $T1 --out bad : -np 1 "$STOKE" train $T1 --out bad --val tiny.stoke
expect err.txt "rank 1 differs from rank 0: --val given against none"
# a rank stopped before it starts MPI, or 0.3 s in: the job ends by the
# watchdog within its timeout, saying why
for delay in 0 0.3; do
    rm -f job.rc
    ($MPIRUN --oversubscribe -np 1 "$STOKE" train $T1 --out early --dist-timeout 3 : \
        -np 1 sh -c 'sleep "$0"; kill -STOP $$; exec "$@"' $delay "$STOKE" train $T1 --out early \
        --dist-timeout 3 >out.txt 2>err.txt; echo $? >job.rc) &
    i=0
    while [ ! -f job.rc ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    [ -f job.rc ] || { fail "stopped at $delay s: the job did not end within 30 s"; pkill -KILL -x stoke; }
    wait
    [ "$(cat job.rc 2>/dev/null)" != 0 ] || fail "stopped at $delay s: the job exited 0"
    expect err.txt "has not finished after 3 s: another rank has hung, stopped or died"
done

# Failures stop the job within a bounded time, the last checkpoint intact.
# rank_pid R: the pid of the stoke process of rank R (from its environment).
rank_pid() { # this test's rank $1 only: other tests' jobs may run at once (ctest -j)
    for p in $(pgrep -x stoke); do
        [ "$(readlink /proc/$p/cwd 2>/dev/null)" = "$(pwd -P)" ] || continue
        if { tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo $p
            return
        fi
    done
}
# long_job DIR SIGNAL [FLAGS]: rank 1 gets SIGNAL mid-run; waits up to 60 s for the job's end
long_job() {
    rm -f job.rc
    ($MPI "$STOKE" train --data tiny.stoke --threads 1 --workers 1 --model mlp --epochs 100000 \
        --transform center:28 --batch 8 --out "$1" --dist-timeout 3 ${3:-} >out.txt 2>err.txt
     echo $? >job.rc) &
    i=0
    while [ ! -f "$1/last.safetensors" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    pid=$(rank_pid 1)
    [ -n "$pid" ] || { fail "$2: no rank 1 process"; wait; return; }
    kill -"$2" "$pid"
    i=0
    # bounded: 3 s of watchdog, then mpirun's own teardown (slow on a loaded machine)
    while [ ! -f job.rc ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
    [ -f job.rc ] || { fail "$2: the job did not stop within 120 s"; kill -KILL $(rank_pid 0) $(rank_pid 1); }
    wait
    [ "$(cat job.rc 2>/dev/null)" != 0 ] || fail "$2: the job exited 0"
    "$PYTHON3" - "$STOKE_TESTS/python" "$1/last.safetensors" <<'PY' || fail "$2: last checkpoint damaged"
import sys
sys.path.insert(0, sys.argv[1])
import st_io
st_io.load(sys.argv[2])
PY
}
# a rank that hangs (stopped): the watchdog of the others stops the job
long_job hung STOP
expect err.txt "has not finished after 3 s: another rank has hung"
# a rank that dies: mpirun stops the job
long_job killed KILL
# the NCCL watchdog: the GPU would wait forever for the stopped peer
if [ -n "${NCCL_TESTED:-}" ]; then
    long_job hung_gpu STOP "--device cuda"
    expect err.txt "the NCCL all-reduce has not finished after 3 s (communicator aborted): another rank has hung"
fi
finish
