#!/bin/sh
# The reference the flag tables make (tools/reference.h), written by the
# stoke binary itself, so that it cannot drift from them:
#   scripts/make-reference.sh STOKE OUTDIR   man/man1/stoke.1, stoke-CMD.1, stoke.bash, _stoke
#                                            (CMake runs it; cmake --install installs them)
#   scripts/make-reference.sh STOKE --docs   docs/cli.md (`make reference`; ctest's
#                                            cli_reference fails when it is out of date)
set -eu
STOKE=$1
OUT=$2
if [ "$OUT" = --docs ]; then
    "$STOKE" help --markdown > "$(dirname "$0")/../docs/cli.md"
    exit 0
fi
mkdir -p "$OUT/man/man1"
"$STOKE" help --man > "$OUT/man/man1/stoke.1"
for c in $("$STOKE" help --commands); do
    "$STOKE" help --man "$c" > "$OUT/man/man1/stoke-$c.1"
done
"$STOKE" completion bash > "$OUT/stoke.bash"
"$STOKE" completion zsh > "$OUT/_stoke"
touch "$OUT/written"
