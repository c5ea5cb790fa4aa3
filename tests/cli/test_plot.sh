#!/bin/sh
# stoke plot: the curves of one run and of several overlaid, as SVG and PNG;
# the SVG renders (rsvg-convert) to a picture that is not blank and holds
# each run's colour; refusals name the directory, file, line or flag.
. "$STOKE_TESTS/cli/lib.sh"
run 0 "$STOKE" pack --from idx "$STOKE_FIXTURES/idx" tiny.stoke
T="--data tiny.stoke --val tiny.stoke --batch 8 --threads 2 --no-tensorboard"
run 0 "$STOKE" train $T --model mlp --epochs 3 --out a
run 0 "$STOKE" train $T --model cnn --epochs 2 --lr 0.01 --out b

run 0 "$STOKE" plot a --out one.svg
expect out.txt "plot: 1 run -> one.svg"
run 0 "$STOKE" plot a   # the default: next to the run, not in the current folder
expect out.txt "plot: 1 run -> a/plot.svg"
[ -s a/plot.svg ] && [ ! -e plot.svg ] || fail "plot without --out: not a/plot.svg"
run 0 "$STOKE" plot a b --json --out j.svg
"$PYTHON3" -c '
import json; d = json.load(open("out.txt"))
assert d == {"out": "j.svg", "kind": "runs", "runs": ["a", "b"]}, d
' || fail "plot --json"
run 0 "$STOKE" plot a b --out two.svg --title "mlp against cnn"
expect two.svg "mlp against cnn"
for t in loss "accuracy (%)" "learning rate" "images/s" "stall (%)" "memory (MB)"; do
    expect two.svg ">$t</text>"
done
have_rsvg=0
command -v rsvg-convert >/dev/null 2>&1 && have_rsvg=1
if [ $have_rsvg = 1 ]; then
    rsvg-convert -o two_svg.png two.svg || fail "rsvg-convert cannot render two.svg"
    run 0 "$STOKE" plot a b --out two.png
    "$PYTHON3" - <<'PY' || fail "the plots are blank or lack a run's colour"
from PIL import Image
for name in ("two_svg.png", "two.png"):
    im = Image.open(name).convert("RGB")
    assert im.size == (1260, 800), (name, im.size)
    colours = im.getcolors(maxcolors=1 << 20)
    assert len(colours) > 50, (name, len(colours))  # text, axes, lines: not blank
    px = set(c for _, c in colours)
    for want in ((0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28)):  # run a, run b
        assert want in px, (name, want)
    white = max(colours)[1]
    assert white == (255, 255, 255), (name, white)
PY
    # a PNG --out that is a link is written through it; one that is a device
    # stays a device, and nothing is made beside it (its folder may be /dev)
    ln -s linked.png link.png
    run 0 "$STOKE" plot a b --out link.png
    [ -L link.png ] && cmp -s linked.png two.png || fail "plot --out LINK.png: the link replaced or not written"
    mkdir devdir
    if mknod devdir/node.png c 1 3 2>/dev/null; then
        run 0 "$STOKE" plot a b --out devdir/node.png
        [ -c devdir/node.png ] || fail "plot --out onto a device made it a file"
        only_entries devdir 1
    fi
else
    echo "note: no rsvg-convert: the PNG path is not checked"
fi
# a run that has not finished an epoch yet, and an old run without steps.csv
mkdir c
head -1 a/metrics.csv >c/metrics.csv
run 0 "$STOKE" plot c --out c.svg
expect c.svg ">no data</text>"
rm a/steps.csv
run 0 "$STOKE" plot a --out old.svg

# refusals
run 1 "$STOKE" plot nothere --out x.svg
expect err.txt "stoke: nothere: no metrics.csv (not a stoke train run directory?)"
mkdir bad
printf 'epoch,step,lr\n1,3,0.1\n2,x,0.1\n' >bad/metrics.csv
run 1 "$STOKE" plot bad --out x.svg
expect err.txt "bad/metrics.csv: line 3: step is not a number"
printf 'step,epoch,loss,lr\n' >bad/steps.csv
printf 'lr,epoch\n0.1,1\n' >bad/metrics.csv
run 1 "$STOKE" plot bad --out x.svg
expect err.txt "bad/metrics.csv: the first column is not epoch"
run 2 "$STOKE" plot a --out x.pdf
expect err.txt "--out x.pdf: write a .svg or a .png"
run 2 "$STOKE" plot
[ -f x.svg ] && fail "a refused plot wrote its file"
run 0 "$STOKE" plot --help
expect out.txt "stoke plot RUNDIR [RUNDIR...]"
finish
