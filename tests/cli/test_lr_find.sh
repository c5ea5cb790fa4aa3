#!/bin/sh
# stoke lr-find end to end: the sweep on real batches (past an epoch), the
# suggestions and the curve in --json, the plot as SVG and PNG, a sweep
# that blows up stops early, nothing written but the plot; refusals.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke   # 50 images: 6 batches of 8
T="--data tiny.stoke --batch 8 --threads 2 --model cnn"

run 0 "$STOKE" lr-find $T --steps 20 --start 1e-5 --end 1 --json --out curve.svg
"$PYTHON3" - <<'PY' || fail "lr-find --json"
import json, math
d = json.load(open("out.txt"))
n = d["steps"]
assert n >= 3 and len(d["lr"]) == len(d["loss"]) == len(d["smooth"]) == n, d
assert abs(d["lr"][0] - 1e-5) < 1e-12, d["lr"][:2]
ratio = (1 / 1e-5) ** (1 / 19)  # 20 steps, exponentially spaced
assert all(abs(b / a - ratio) < 1e-6 for a, b in zip(d["lr"], d["lr"][1:])), d["lr"]
assert d["lr"][0] <= d["steepest"] <= d["lr"][-1], d
assert abs(d["min_over_10"] * 10 - d["min_lr"]) < 1e-12 * d["min_lr"], d
assert d["min_loss"] == min(d["smooth"]) or math.isclose(d["min_loss"], min(d["smooth"]), rel_tol=1e-5)
assert d["plot"] == "curve.svg"
PY
expect err.txt "suggested learning rate: "
grep -q '<svg' curve.svg || fail "curve.svg is not an SVG"
only_entries . 4   # tiny.stoke, out.txt, err.txt, curve.svg: nothing else written
# rates far too high: the loss blows up and the sweep stops before its end
run 0 "$STOKE" lr-find $T --steps 40 --start 1e-2 --end 1e6 --json --out high.svg
"$PYTHON3" - <<'PY' || fail "lr-find did not stop early"
import json
d = json.load(open("out.txt"))
assert d["diverged"] and d["steps"] < 40, d
PY
expect err.txt "stopped at step "
if command -v rsvg-convert >/dev/null 2>&1; then
    run 0 "$STOKE" lr-find $T --steps 10 --out curve.png
    head -c 8 curve.png | od -c | grep -q 'P   N   G' || fail "curve.png is not a PNG"
fi
run 2 "$STOKE" lr-find $T --start 1 --end 0.1
expect err.txt "--end 0.1 must be above --start 1"
run 2 "$STOKE" lr-find $T --out curve.pdf
expect err.txt "--out curve.pdf: FILE.svg or FILE.png"
run 2 "$STOKE" lr-find --data tiny.stoke
expect err.txt "--data and --model are required"
run 1 "$STOKE" lr-find $T --transform rrc:224
expect err.txt "rrc:224"
# the fewest steps a suggestion can come from: 3 (2 was accepted, then failed
# blaming --start)
run 2 "$STOKE" lr-find $T --steps 2
expect err.txt "--steps 2: expected an integer in 3..100000"
run 0 "$STOKE" lr-find $T --steps 3 --end 1e-3 --out three.svg
expect out.txt "suggested learning rate"
finish
