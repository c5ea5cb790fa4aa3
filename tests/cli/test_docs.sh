#!/bin/sh
# The docs stay true: every `stoke` command in README.md and docs/*.md parses
# with today's flags (tests/docs/check_commands.py, STOKE_PARSE_ONLY), every
# relative link and #anchor resolves (check_links.py), and
# every shell, console and Python block runs as written, page by page, on a
# cut of Debian's Fashion-MNIST and the fixtures (tests/docs/run_docs.py).
. "$STOKE_TESTS/cli/lib.sh"
SRC="$STOKE_TESTS/.."
run 0 "$PYTHON3" "$STOKE_TESTS/docs/check_commands.py" "$SRC" "$STOKE"
cat out.txt >&2
run 0 "$PYTHON3" "$STOKE_TESTS/docs/check_links.py" "$SRC"
cat out.txt >&2
FM=/usr/share/datasets/fashion-mnist
[ -d "$FM" ] || { echo "skipped the docs' runs: no $FM (dataset-fashion-mnist)"; finish; exit 77; }
# (the code they run runs under the sanitizers in the tests of each command;
# here only the release build runs it, to keep their time)
[ -z "${STOKE_SANITIZE:-}" ] || { echo "the docs' runs: release build only"; finish; exit 0; }
run 0 "$PYTHON3" "$STOKE_TESTS/docs/run_docs.py" "$SRC" "$STOKE" pages
cat out.txt >&2
expect out.txt "0 failed;"
[ -s pages/README/runs/cnn/best.onnx ] || fail "the README's quick start wrote no runs/cnn/best.onnx"
finish
