#!/bin/sh
# Every public header (not *_impl.h; not kernels/cuda, the CUDA backend's
# own) compiles as C++ on its own: a C++ program can include any of them.
# (tests/test_cxx_link.cpp links one against the C libraries: extern "C".)
set -u
: "${CXX:?}" "${ROOT:?}" "${BUILD:?}"
cd "$ROOT" || exit 1
fails=0 n=0
for h in $(git ls-files 'common/*.h' 'storage/*.h' 'augment/*.h' 'device/*.h' 'kernels/*.h' 'engine/*.h' \
        'loader/*.h' 'train/*.h' 'distributed/*.h' 'runlog/*.h' 'decode/*.h' 'pack/*.h' 'run/*.h' \
        'tune/*.h' 2>/dev/null | grep -v '_impl\.h$' |
        grep -v '^kernels/cuda/'); do
    n=$((n + 1))
    grep -q 'extern "C"' "$h" || { echo "FAIL: $h has no extern \"C\" guard"; fails=$((fails + 1)); }
    printf '#include "%s"\nint main() { return 0; }\n' "$h" |
        "$CXX" -std=c++17 -fsyntax-only -Wall -Werror -I. -I"$BUILD" $MPI_INCLUDES -x c++ - \
        2>err.txt || { echo "FAIL: $h does not compile as C++:"; head -5 err.txt; fails=$((fails + 1)); }
done
rm -f err.txt
[ "$n" -gt 50 ] || { echo "FAIL: only $n headers found (git ls-files?)"; exit 1; }
[ "$fails" = 0 ] || { echo "$fails of $n headers failed"; exit 1; }
echo "all $n public headers compile as C++ with extern \"C\" guards"
