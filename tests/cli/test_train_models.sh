#!/bin/sh
# Today's architectures through stoke train as the built-ins go: each trains
# an epoch on 28 px images (their small-image variants) and evaluates;
# --drop-path (refused, named, for a model without stochastic depth);
# freezing by torchvision's names; pipeline stages over efficientnet_b0's
# blocks and vit_tiny's encoder layers; data-parallel on 2 ranks (where
# mpirun is); a checkpoint resumed; eval and predict on it.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 images, 28 px
T="--data tiny.stoke --val tiny.stoke --batch 10 --threads 2 --workers 2 --no-tensorboard"
# the wide ones are slow under the sanitizers: the release build runs them
# all, ASan four, ThreadSanitizer (an order of magnitude slower) two
case "${STOKE_SANITIZE:-}" in
"") models="efficientnet_b0 mobilenet_v3_small regnet_y_400mf vit_tiny mobilenet_v3_large convnext_tiny" ;;
*thread*) models="mobilenet_v3_small vit_tiny" ;;
*) models="efficientnet_b0 mobilenet_v3_small regnet_y_400mf vit_tiny" ;;
esac
# one model with stochastic depth, one of blocks for the pipeline, one for two ranks
case "${STOKE_SANITIZE:-}" in
*thread*) SD=vit_tiny BLOCKS=mobilenet_v3_small DDP=mobilenet_v3_small ;;
*) SD=efficientnet_b0 BLOCKS=efficientnet_b0 DDP=regnet_y_400mf ;;
esac
for m in $models; do
    run 0 "$STOKE" train $T --model $m --epochs 1 --optimizer adamw --lr 1e-3 --out "r-$m"
    expect out.txt "$m"
    [ -s "r-$m/last.safetensors" ] || fail "$m: no checkpoint"
done
run 0 "$STOKE" eval --checkpoint r-vit_tiny/last.safetensors --data tiny.stoke
expect out.txt "top-1"
run 0 "$STOKE" predict "r-$SD/last.safetensors" "tiny.stoke#3"
expect out.txt "tiny.stoke#3"
run 0 "$STOKE" train $T --model vit_tiny --epochs 2 --optimizer adamw --lr 1e-3 --resume --out r-vit_tiny
expect out.txt "epoch 2"
# stochastic depth
run 0 "$STOKE" train $T --model $SD --epochs 1 --drop-path 0.3 --out dp
run 2 "$STOKE" train $T --model $SD --epochs 1 --drop-path 1.5 --out dp2
expect err.txt "--drop-path"
run 1 "$STOKE" train $T --model resnet18 --epochs 1 --drop-path 0.1 --out dp3
expect err.txt "resnet18 has no stochastic depth"
# --freeze by torchvision's names: the frozen weights do not move from one
# epoch to the next, the others do
run 0 "$STOKE" train $T --model mobilenet_v3_small --epochs 1 --freeze features.0 \
    --freeze features.1 --out frozen
cp frozen/last.safetensors frozen-1.safetensors
run 0 "$STOKE" train $T --model mobilenet_v3_small --epochs 2 --freeze features.0 \
    --freeze features.1 --resume --out frozen
"$PYTHON3" - "$STOKE_TESTS/python" <<'PY' || fail "--freeze features.0 features.1"
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, st_io
a, _ = st_io.load("frozen-1.safetensors")
b, _ = st_io.load("frozen/last.safetensors")
for k in ("features.0.0.weight", "features.1.block.0.0.weight", "features.1.block.1.fc1.weight"):
    assert np.array_equal(a[k], b[k]), k
assert not np.array_equal(a["classifier.3.weight"], b["classifier.3.weight"])
PY
# pipeline stages over blocks and encoder layers
run 0 "$STOKE" train $T --model vit_tiny --epochs 1 --micro-batches 2 --pipeline 2 \
    --split-after encoder.layers.encoder_layer_5 --out pipe-vit
expect out.txt "stage 1: encoder.layers.encoder_layer_6"
run 0 "$STOKE" train $T --model $BLOCKS --epochs 1 --micro-batches 2 --pipeline 2 \
    --out pipe-blocks
expect out.txt "pipeline: 2 stages"
# two ranks (where mpirun is and this build has MPI)
if command -v mpirun >/dev/null 2>&1 && [ "${STOKE_HAVE_MPI:-ON}" = ON ]; then
    # Open MPI's own: root, and under the sanitizers cli_train_mpi's settings
    # (Open MPI keeps memory at MPI_Finalize in plugins it has unloaded)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_mca_base_component_disable_dlclose=1
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
    export TSAN_OPTIONS=halt_on_error=1:suppressions=$STOKE_TESTS/mpi_tsan.supp
    run 0 mpirun -np 2 --oversubscribe "$STOKE" train $T --threads 1 --workers 1 \
        --model $DDP --epochs 1 --out ddp
    [ -s ddp/last.safetensors ] || fail "no checkpoint from 2 ranks"
fi
finish
