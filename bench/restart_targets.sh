#!/bin/sh
# Issue 18's targets in one run: restart-marker segments against today's
# whole-stream decode, for each restart interval N (0: no markers, the pack
# of today), on one JPEG folder (../shared/data/make-jpeg-set.sh makes one):
#   pack: seconds, images/s, file size against the plain pack
#   bench_augment per core: (a) tjDecompress2 full decode of the stored files,
#     (c) the decode for rrc:224, (d) the whole rrc:224,flip transform
#   stoke bench rrc:224,flip with 2 workers (the median of 3 runs of 3 epochs,
#     no checksum), against
#     2 x (a) of the plain pack (the 2-core full-decode limit), against N=0,
#     and (with BEFORE_BUILD, a build of the loader before restart markers,
#     e.g. commit 8143e09) against that loader's stoke bench of the plain pack
#   bench/restart_targets.sh BUILD_DIR IMAGE_FOLDER [INTERVALS] [BEFORE_BUILD]
set -eu
B=$1
SRC=$2
INTERVALS=${3:-"0 1 2 4 8"}
BEFORE=${4:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
PY=/usr/bin/python3
field() { $PY -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# The median of 3 runs of `stoke bench` (binary $1, file $2), images/s.
bench() {
    for r in 1 2 3; do
        field "$("$1" bench --transform rrc:224,flip --workers 2 --epochs 3 --no-checksum --json "$2" 2>/dev/null)" images_per_sec
    done | sort -g | sed -n 2p
}
rate() { awk -v k="$1" '$0 ~ "^\\(" k "\\)" {for (i = 1; i < NF; i++) if ($(i + 1) == "images/s") print $i}'; }
printf '%-4s %9s %9s %11s %8s %8s %8s %9s %8s %8s\n' N pack_s pack_img/s bytes size_x a_1core c_1core d_1core bench vs_2a
for n in $INTERVALS; do
    P=$("$B/stoke" pack --restart "$n" --workers 2 --json "$SRC" "$W/r$n.stoke" 2>/dev/null)
    size=$(field "$P" bytes_out)
    [ "$n" = 0 ] && plain=$size
    A=$("$B/bench_augment" "$W/r$n.stoke" --seconds 3 --only acd)
    a=$(echo "$A" | rate a)
    c=$(echo "$A" | rate c)
    d=$(echo "$A" | rate d)
    [ "$n" = 0 ] && a0=$a
    s=$(bench "$B/stoke" "$W/r$n.stoke")
    [ "$n" = 0 ] && s0=$s
    if [ -n "$BEFORE" ] && [ "$n" = 0 ]; then
        sb=$(bench "$BEFORE/stoke" "$W/r0.stoke")
        db=$("$BEFORE/bench_augment" "$W/r0.stoke" --seconds 3 --only d | rate d)
        echo "before: $BEFORE on the plain pack: (d) $(printf %.0f "$db") images/s per core, stoke bench $(printf %.0f "$sb") images/s"
    fi
    $PY -c "
n, size, plain, a, a0, c, d, s, s0 = '$n', $size, ${plain:-$size}, $a, ${a0:-$a}, $c, $d, $s, ${s0:-$s}
before = ' %.2fx before' % (s / ${sb:-0}) if ${sb:-0} else ''
print(f'{n:<4} {float(\"$(field "$P" seconds)\"):9.2f} {float(\"$(field "$P" images_per_sec)\"):9.0f} {size:11d} {size / plain:8.3f} {a:8.0f} {c:8.0f} {d:9.0f} {s:8.0f} {s / (2 * a0):8.2f}x   {s / s0:.2f}x N=0{before}')
"
done
