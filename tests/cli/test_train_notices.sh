#!/bin/sh
# What a newcomer's first day needs said (issue 48): a note when drop_last
# leaves out more than 5% of the data, a warning when evaluation's loss is
# far above training's (eval-mode batch norm) and when --restore-best
# restores an epoch at chance level, epoch lines that reach a file as they
# happen (line-buffered stdout), and predict taking FILE.stoke#INDEX.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 images, 10 classes
T="--data tiny.stoke --workers 2 --threads 1 --no-tensorboard"

# 50 images at batch 20: 10 left out (20%) each epoch; at batch 8 only 2 (4%)
run 0 "$STOKE" train $T --model mlp --epochs 1 --batch 20 --out d1
expect out.txt "note: batch 20 leaves out 10 of the 50 images (20.0%) each epoch"
run 0 "$STOKE" train $T --model mlp --epochs 1 --batch 8 --out d2
grep -q "leaves out" out.txt && fail "a note for 4% left out"

# a high --lr at batch 8: eval-mode loss thousands of times training's; the
# random fixture is at chance, so --restore-best restores a chance-level epoch
run 0 "$STOKE" train $T --val tiny.stoke --model resnet8 --epochs 2 --batch 8 --lr 2 \
    --restore-best --out w1
expect err.txt "stoke: warning: epoch 1: validation loss"
expect err.txt "is far above the training loss"
[ "$(grep -c 'far above' err.txt)" = 1 ] || fail "the validation-loss warning was given more than once"
expect err.txt "stoke: warning: --restore-best restored epoch"
expect err.txt "is at chance level (10.0% for 10 classes)"
run 0 "$STOKE" train $T --val tiny.stoke --model mlp --epochs 1 --batch 8 --lr 0.01 --out w2
grep -q "warning" err.txt && fail "a warning on a quiet run: $(grep warning err.txt)"

# stdout into a file: each epoch's line is there once the epoch ends. Block
# buffering held them until 4 KB had gathered (about 29 lines, seconds of
# resnet8 epochs here): the first lines seen then come ~29 at once.
"$STOKE" train $T --model resnet8 --batch 8 --epochs 100000 --out lb > lb.log 2> lb.err &
pid=$!
i=0
while ! grep -q "^epoch 1/" lb.log && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
seen=$(grep -c "^epoch " lb.log)
[ "$seen" -ge 1 ] && [ "$seen" -le 10 ] ||
    fail "stdout into a file: $seen epoch lines when the first appeared (line-buffered: 1 or 2)"
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || fail "the interrupted run exited $rc"

# predict FILE.stoke#INDEX: the record, as predict names it; a record past
# the end is skipped with the reason
run 0 "$STOKE" predict d2/last.safetensors "tiny.stoke#3" "tiny.stoke#49"
expect out.txt "tiny.stoke#3: "
expect out.txt "tiny.stoke#49: "
"$STOKE" predict d2/last.safetensors tiny.stoke > all.txt 2>/dev/null
grep "^tiny.stoke#3: " all.txt > want.txt
grep "^tiny.stoke#3: " out.txt > got.txt
cmp -s want.txt got.txt || fail "tiny.stoke#3 alone predicts another answer than in the whole set"
run 0 "$STOKE" predict d2/last.safetensors "tiny.stoke#3" "tiny.stoke#50"
expect err.txt "skipped tiny.stoke#50: no record 50: the dataset has 50 (0..49)"
run 1 "$STOKE" predict d2/last.safetensors "none.stoke#1"
expect err.txt "none.stoke#1: cannot open: no such file, and no such dataset"
finish
