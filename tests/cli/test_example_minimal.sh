#!/bin/sh
# examples/train_minimal.c: the smallest C program over the library trains
# on a packed set, prints a line per epoch and the fit's result.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
run 0 "$TRAIN_MINIMAL" tiny.stoke tiny.stoke 4
expect out.txt "epoch 1: train loss "
expect out.txt "best epoch "
grep -qE "stopped at [0-9]+: (finished|early_stop)" out.txt || fail "no result line: $(cat out.txt)"
[ "$(grep -c '^epoch' out.txt)" -ge 3 ] || fail "fewer than 3 epoch lines"
run 1 "$TRAIN_MINIMAL" missing.stoke tiny.stoke
expect err.txt "train_minimal: missing.stoke"
run 2 "$TRAIN_MINIMAL"
finish
