# Helpers for the end-to-end CLI tests. Environment (set by ctest):
#   STOKE (the binary), STOKE_FIXTURES, STOKE_TESTS (tests/ source dir), PYTHON3, WORK.
set -u
: "${STOKE:?}" "${STOKE_FIXTURES:?}" "${WORK:?}"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 1
FAILS=0

fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}

# run EXPECTED_RC CMD...: run, keep stdout in out.txt and stderr in err.txt.
run() {
    want=$1
    shift
    "$@" >out.txt 2>err.txt
    got=$?
    if [ "$got" != "$want" ]; then
        fail "exit $got (wanted $want): $*"
        sed 's/^/    stderr: /' err.txt | head -5 >&2
    fi
}

# expect FILE TEXT: FILE contains TEXT (fixed string).
expect() {
    grep -qF -- "$2" "$1" || { fail "$1 lacks '$2'"; sed 's/^/    /' "$1" | head -5 >&2; }
}

# only_entries DIR N: DIR holds exactly N entries, dot files included.
only_entries() {
    n=$(ls -A "$1" | wc -l)
    [ "$n" = "$2" ] || { fail "$1 holds $n entries, wanted $2:"; ls -A "$1" >&2; }
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS check(s) failed" >&2
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
