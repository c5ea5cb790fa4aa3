#!/bin/sh
# examples/train_run.c: a whole run from C through run/run.h trains with
# settings by name, writes the run folder stoke train writes (the same
# metrics.csv as stoke train with the same flags), resumes, and reports
# bad settings with the library's messages.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
run 0 "$TRAIN_RUN" tiny.stoke mlp epochs=3 batch=10 out=c no_tensorboard=yes stop_after=2
expect out.txt "epoch 1: train loss "
expect out.txt "2 epochs, best epoch 2, stopped: stop_after"
run 0 "$TRAIN_RUN" tiny.stoke mlp epochs=3 batch=10 out=c no_tensorboard=yes resume=yes
expect out.txt "3 epochs"
run 0 "$STOKE" train --data tiny.stoke --model mlp --epochs 3 --batch 10 --out cli --no-tensorboard
cut -d, -f1-5 c/metrics.csv >a.csv
cut -d, -f1-5 cli/metrics.csv >b.csv
cmp -s a.csv b.csv || fail "metrics.csv differs from stoke train's: $(diff a.csv b.csv)"
run 2 "$TRAIN_RUN" tiny.stoke mlp batch=0
expect err.txt "train_run: --batch 0: expected an integer in 1..65536"
run 2 "$TRAIN_RUN" tiny.stoke mlp lr
expect err.txt "train_run: 'lr': expected NAME=VALUE"
run 1 "$TRAIN_RUN" missing.stoke mlp out=m
expect err.txt "train_run: missing.stoke"
run 2 "$TRAIN_RUN"
finish
