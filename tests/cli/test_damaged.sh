#!/bin/sh
# Damaged .stoke files against every reading command: bytes of the meta
# pages, of every branch/leaf page header and node-offset array, of the nodes,
# and random bytes anywhere, changed one at a time in a small packed file.
# Each of info, verify, bench and peek must read the mutant or refuse it with
# a message naming the file and exit 1; never crash (a signal, a sanitizer
# report), hang, or exit otherwise.
. "$STOKE_TESTS/cli/lib.sh"
FX=$STOKE_FIXTURES
run 0 "$STOKE" pack --from idx "$FX/idx" small.stoke   # 50 raw 28x28 images: meta, branch, leaves
run 0 "$STOKE" pack "$FX/good" jpeg.stoke              # 11 JPEGs: overflow pages
# Mutants per file (chosen header bytes, random bytes): fewer in the sanitizer
# builds, where each run of stoke is several times slower.
PICKS="40 10"
[ -n "${STOKE_SANITIZE:-}" ] && PICKS="12 4"
"$PYTHON3" - "$STOKE" $PICKS <<'PY' || fail "mutants"
import os, random, struct, subprocess, sys
stoke, n_header, n_random = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PS = 4096
def pages(b):
    """(page number, flags) of every page."""
    return [(i, struct.unpack_from("<H", b, i * PS + 10)[0]) for i in range(len(b) // PS)]
def offsets(b):
    """Byte offsets worth changing: meta records, page headers, node offsets, node headers."""
    out = []
    for pg, flags in pages(b):
        base = pg * PS
        if pg < 2:
            out += range(base, base + 152)
        elif flags & 0x03:  # branch or leaf
            lower = struct.unpack_from("<H", b, base + 12)[0]
            out += range(base, base + min(lower, 16 + 2 * 40))
            for i in range(max(0, min((lower - 16) // 2, 40))):
                node = struct.unpack_from("<H", b, base + 16 + 2 * i)[0]
                if node + 8 <= PS:
                    out += range(base + node, base + node + 8)
        else:
            out += range(base, base + 16)
    return out
rng = random.Random(12)
cmds = [["info"], ["verify"], ["bench", "--epochs", "1", "--batch", "4", "--workers", "1"],
        ["peek", "--count", "2", "--out", "peek.ppm"]]
tried = refused = 0
bad = []
for name in ("small.stoke", "jpeg.stoke"):
    orig = open(name, "rb").read()
    offs = offsets(orig)
    picks = rng.sample(offs, min(n_header, len(offs))) + \
        [rng.randrange(len(orig)) for _ in range(n_random)]
    for at in picks:
        b = bytearray(orig)
        b[at] = (b[at] ^ rng.choice((0x01, 0x80, 0xff))) or 0x5a
        open("mutant.stoke", "wb").write(b)
        for c in cmds:
            tried += 1
            try:
                p = subprocess.run([stoke] + c + ["mutant.stoke"], capture_output=True, timeout=60)
            except subprocess.TimeoutExpired:
                bad.append((name, at, c[0], "hung"))
                continue
            err = p.stderr.decode(errors="replace")
            said = err + p.stdout.decode(errors="replace")
            if "Sanitizer" in err or "runtime error" in err:
                bad.append((name, at, c[0], p.returncode, err[-300:]))
                continue
            if p.returncode == 0:
                continue
            refused += 1
            if p.returncode != 1 or "mutant.stoke" not in said:
                bad.append((name, at, c[0], p.returncode, err[-300:]))
print(f"{tried} runs on mutants, {refused} refused with a message, {len(bad)} wrong")
for x in bad[:10]:
    print("WRONG:", x)
sys.exit(1 if bad else 0)
PY
finish
