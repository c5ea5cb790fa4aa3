#!/bin/sh
# run_fuzz.sh TARGET SEEDS REGRESS WORK SECONDS
# Replays every regression input (crashers found before: each must now pass),
# then fuzzes a copy of the seed corpus for SECONDS. A crash, leak, timeout or
# sanitizer report fails the test; its input is left in WORK/ as crash-*,
# leak-* or timeout-*: copy it to REGRESS (tests/fuzz_regress/<target>/) once fixed.
set -eu
target=$1 seeds=$2 regress=$3 work=$4 seconds=$5
rm -rf "$work"
mkdir -p "$work/corpus"
if [ -d "$regress" ] && [ -n "$(ls -A "$regress")" ]; then
    "$target" -runs=0 "$regress"/* 2>"$work/regress.log" || {
        cat "$work/regress.log" >&2
        echo "FAIL: a regression input of $(basename "$target") fails again" >&2
        exit 1
    }
    echo "regressions: $(ls "$regress" | wc -l) inputs pass"
fi
# -rss_limit_mb keeps the fuzzer inside CI's memory; -timeout flags slow inputs
# (hangs); -max_len covers the largest seed (a small dataset file).
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds" \
    >"$work/fuzz.log" 2>&1 || {
    tail -60 "$work/fuzz.log" >&2
    echo "FAIL: $(basename "$target") found an input that fails (saved in $work)" >&2
    exit 1
}
grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|cov:' "$work/fuzz.log" | tail -3
echo "$(basename "$target"): fuzzed ${seconds}s, no failure"
