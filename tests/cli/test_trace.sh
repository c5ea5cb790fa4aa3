#!/bin/sh
# --trace on stoke train and stoke bench: the files are Chrome trace JSON in
# which spans nest on every thread, every flow has both ends, every stage
# appears and each step's phases lie inside its step (tests/python/check_trace.py);
# --trace-steps bounds the recorded steps; --trace-ops adds layers and
# backward nodes; data-parallel ranks (mpirun) add their all-reduces, one
# file per rank; an emulated GPU adds the host-to-device copy. Refusals.
. "$STOKE_TESTS/cli/lib.sh"
CHECK="$PYTHON3 $STOKE_TESTS/python/check_trace.py"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
run 0 "$STOKE" pack "$STOKE_FIXTURES/good" jpeg.stoke
T="--data tiny.stoke --batch 8 --threads 1 --workers 2 --no-tensorboard"
LOADER="read,decode,augment,chunk,read wait,batches ready,reads in flight"
STEP="wait for batch,step,forward,backward,optimizer,images/s"

run 0 "$STOKE" train $T --model cnn --epochs 2 --out t1 --trace t1.json --trace-steps 0,0
expect err.txt "trace: "
expect err.txt " in t1.json (open in https://ui.perfetto.dev)"
$CHECK t1.json --names "$LOADER,$STEP" --steps 12 >check.txt 2>&1 || fail "t1: $(cat check.txt)"
# the default schedule: 20 steps; a window; layers and backward nodes
run 0 "$STOKE" train $T --model cnn --epochs 4 --out t2 --trace t2.json
$CHECK t2.json --steps 20 >check.txt 2>&1 || fail "t2: $(cat check.txt)"
run 0 "$STOKE" train $T --model resnet8 --epochs 2 --out t3 --trace t3.json --trace-steps 2,3 --trace-ops
$CHECK t3.json --steps 3 --names "conv2d,batch_norm,relu,residual,linear,cross_entropy" \
    >check.txt 2>&1 || fail "t3: $(cat check.txt)"
grep -q '"info":"layer1.0.conv1 \[8,16,28,28\]"' t3.json || fail "t3: no layer span with its shape"
# a batch norm and its ReLU run fused: one span forward, one node backward
grep -q '"info":"layer1.0.bn1+relu \[8,16,28,28\]"' t3.json || fail "t3: no fused batch norm span"
grep -q '"name":"batch_norm_relu"' t3.json || fail "t3: no fused batch norm node backward"
# JPEG decoding in the bench, a window of its batches
run 0 "$STOKE" bench jpeg.stoke --batch 2 --transform rrc:32,flip --epochs 3 --trace b.json
$CHECK b.json --names "$LOADER,wait for batch,consume" >check.txt 2>&1 || fail "bench: $(cat check.txt)"
run 0 "$STOKE" bench jpeg.stoke --batch 2 --transform rrc:32,flip --epochs 3 --trace b2.json \
    --trace-steps 1,2
[ "$(grep -c '"name":"consume"' b2.json)" = 2 ] || fail "bench --trace-steps 1,2: not 2 batches"

# on an emulated (or real) GPU: the host-to-device copy as issued and as the
# copy stream's events timed it (a track of its own), an arrow through it
if "$STOKE" devices | grep -q '^gpu [0-9]'; then
    run 0 "$STOKE" train $T --model mlp --epochs 1 --out g --trace g.json --device cuda
    $CHECK g.json --names "h2d copy,h2d wait,h2d,h2d copy (device),$STEP" >check.txt 2>&1 ||
        fail "gpu: $(cat check.txt)"
    grep -q '"ph":"t"' g.json || fail "gpu: no flow step through the copy"
    grep -q '"name":"device copy stream"' g.json || fail "gpu: no track for the copy stream"
fi
# data-parallel: each rank its file, the all-reduces on the communication thread
MPIRUN=${MPIEXEC:-mpirun}
if [ "${STOKE_HAVE_MPI:-ON}" = ON ] && command -v "$MPIRUN" >/dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    run 0 "$MPIRUN" -np 2 --oversubscribe "$STOKE" train $T --threads 1 --workers 1 --model mlp \
        --epochs 1 --out d --trace d.json
    for f in d.json d.json.rank1.json; do
        $CHECK $f --names "all-reduce bucket,gradient all-reduce wait,$STEP" >check.txt 2>&1 ||
            fail "$f: $(cat check.txt)"
    done
    grep -q '"data-parallel communication"' d.json || fail "no communication thread's name"
fi

# refusals, and a trace that cannot be written does not cost the run
run 2 "$STOKE" train $T --model mlp --trace-ops
expect err.txt "--trace-steps and --trace-ops need --trace FILE.json"
run 2 "$STOKE" train $T --model mlp --trace x.json --trace-steps 5
expect err.txt "--trace-steps 5: expected WAIT,ACTIVE (two counts >= 0)"
run 2 "$STOKE" bench jpeg.stoke --trace-steps 1,2
expect err.txt "--trace-steps needs --trace FILE.json"
run 0 "$STOKE" train $T --model mlp --epochs 1 --out nt --trace /nonexistent/t.json
expect err.txt "stoke: --trace /nonexistent/t.json: No such file or directory"
[ -f nt/last.safetensors ] || fail "the run's checkpoint is missing"
finish
