#!/bin/sh
# stoke tune's shared stream, measured: K trials side by side on one stream
# against the same K trials one after another (each decoding for itself),
# and against the ideal: one decode pass of the data plus K times one
# trial's compute, each measured alone.
#
#   ../shared/data/make-jpeg-set.sh /tmp/jpeg/set 6000      # the JPEG set
#   bench/tune_shared_stream.sh /tmp/jpeg/set [K=4] [EPOCHS=2] [TRANSFORM=rrc:64,flip]
#
# The data: the set's manifest split 5:1 into training and validation sets,
# packed as they are. The trials: mlp, --batch 128, a grid of K learning
# rates under FIFO (every trial runs every epoch: both sweeps do the same
# work). The decode pass: `stoke bench` over the training set (TRANSFORM,
# EPOCHS epochs) and over the validation set once per epoch (the trials'
# validation transform, accurate decoding). One trial's compute: `stoke
# train` of one trial on copies of the sets re-encoded at 64 px (--max-side
# 64: the same tensors, next to nothing to decode), minus `stoke bench` of
# those copies: its steps, evaluation, checkpoints and records. Prints the
# wall times and ratios, and whether both sweeps wrote the same trials.csv.
set -eu
SET=${1:?usage: tune_shared_stream.sh JPEG_SET_DIR [K] [EPOCHS] [TRANSFORM]}
K=${2:-4}
E=${3:-2}
T=${4:-rrc:64,flip}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$HERE/build}
S=$BUILD/stoke
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
SET=$(cd "$SET" && pwd)
awk -F, -v d="$SET" 'NR > 1 { n++; print d "/" $1, $2 > (n % 6 ? "'"$W"'/train.txt" : "'"$W"'/val.txt") }' \
    "$SET/manifest.csv"
for part in train val; do
    "$S" pack --from list "$W/$part.txt" "$W/$part.stoke" > /dev/null 2>&1
    "$S" pack --from list --max-side 64 "$W/$part.txt" "$W/$part-64.stoke" > /dev/null 2>&1
done
LRS=$(awk -v k="$K" 'BEGIN { for (i = 0; i < k; i++) printf "%s%g", i ? "," : "", 0.01 * (i + 1) }')
now() { date +%s.%N; }
sweep() { # $1: --concurrent
    "$S" tune --data "$W/train.stoke" --val "$W/val.stoke" --model mlp --batch 128 --transform "$T" \
        --epochs "$E" --space "lr=grid($LRS)" --scheduler fifo --concurrent "$1" \
        --no-tensorboard --out "$W/c$1" --json > "$W/c$1.json" 2> "$W/c$1.err"
}
t0=$(now); sweep 1; t1=$(now); sweep "$K"; t2=$(now)
seq=$(echo "$t1 - $t0" | bc -l)
shared=$(echo "$t2 - $t1" | bc -l)
# the same trials either way (the seconds column aside)
cut -d, -f1-6,8- "$W/c1/trials.csv" | sed 's|--out [^ ]*||' > "$W/a.csv"
cut -d, -f1-6,8- "$W/c$K/trials.csv" | sed 's|--out [^ ]*||' > "$W/b.csv"
cmp -s "$W/a.csv" "$W/b.csv" && same=yes || same=NO
VT=$(/usr/bin/python3 - "$W/c$K/trials/0000/last.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb")
n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"]["val_transform"])
PY
)
decode_pass() { # $1: suffix of the sets
    "$S" bench "$W/train$1.stoke" --transform "$T" --batch 128 --epochs "$E" > /dev/null 2>&1
    i=0
    while [ "$i" -lt "$E" ]; do
        "$S" bench "$W/val$1.stoke" --transform "$VT" --batch 128 --epochs 1 --accurate-decode \
            > /dev/null 2>&1
        i=$((i + 1))
    done
}
t3=$(now); decode_pass ""; t4=$(now); decode_pass "-64"; t5=$(now)
"$S" train --data "$W/train-64.stoke" --val "$W/val-64.stoke" --model mlp --batch 128 \
    --transform "$T" --val-transform "$VT" --epochs "$E" --lr 0.01 --no-tensorboard \
    --out "$W/one" > /dev/null 2>&1
t6=$(now)
decode=$(echo "$t4 - $t3" | bc -l)
compute=$(echo "($t6 - $t5) - ($t5 - $t4)" | bc -l)
ideal=$(echo "$decode + $K * $compute" | bc -l)
n=$("$S" info "$W/train.stoke" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])')
printf 'K=%s trials, %s epochs, mlp, batch 128, %s (val: %s), %s training images; same trials.csv both ways: %s\n' \
    "$K" "$E" "$T" "$VT" "$n" "$same"
printf '  one after another (--concurrent 1):        %6.1f s\n' "$seq"
printf '  side by side on one stream (--concurrent %s): %6.1f s: %.2fx faster, %.2f of the sequential time\n' \
    "$K" "$shared" "$(echo "$seq / $shared" | bc -l)" "$(echo "$shared / $seq" | bc -l)"
printf '  ideal: decode once %.1f s + %s x one trial'"'"'s compute %.2f s = %.1f s; side by side is %.2fx the ideal\n' \
    "$decode" "$K" "$compute" "$ideal" "$(echo "$shared / $ideal" | bc -l)"
