# Stoke: the two set-up commands of the README.
#   make test   install dependencies, build, run every test; then again under
#               ASan+UBSan and under TSan, without CUDA, and the fuzz targets
#   make demo   the main job on the embedded default (Fashion-MNIST from Debian)
BUILD ?= build
SAN_BUILD ?= build-sanitize
TSAN_BUILD ?= build-tsan
NOCUDA_BUILD ?= build-nocuda
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build test test-sanitize test-tsan test-nocuda test-fuzz demo format clean reference

all: build

deps:
	./scripts/install-deps.sh
	./scripts/make-venv.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# docs/cli.md from the flag tables (tools/reference.h); ctest's cli_reference
# fails until it is written again after a flag changes
reference:
	cmake --build $(BUILD) -j $(JOBS) --target stoke
	./scripts/make-reference.sh $(BUILD)/stoke --docs

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-sanitize
	$(MAKE) test-tsan
	$(MAKE) test-nocuda
	$(MAKE) test-fuzz

# The sanitizer builds are the STOKE_CUDA=EMULATE configuration: the CUDA
# backend's own code runs against tests/cuda_host (the host CUDA runtime,
# cuBLAS and cuDNN), so ASan, UBSan and TSan check it and the GPU op tests
# pass without a GPU (tests/cuda_host/README.md). Check's timeouts are three
# times the release build's there (CK_TIMEOUT_MULTIPLIER): a sanitized test on
# a slower, loaded CI machine ran past its limit once (test_onnx_graph).
test-sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSTOKE_WERROR=ON \
	    -DSTOKE_SANITIZE=address,undefined -DSTOKE_CUDA=EMULATE $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1 CK_TIMEOUT_MULTIPLIER=3 ctest --output-on-failure -j $(JOBS)

# The thread pool, the loader and the parallel pack under ThreadSanitizer
# (the tests labelled no_own_threads left out: tests/CMakeLists.txt).
# The engine's kernels run OpenMP loops (libgomp, shared with oneDNN); libgomp
# is not built for TSan, whose reports on its barriers are false, so the TSan
# run gives OpenMP one thread (Stoke's own pthreads are still all checked).
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSTOKE_WERROR=ON \
	    -DSTOKE_SANITIZE=thread -DSTOKE_CUDA=EMULATE $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 CK_TIMEOUT_MULTIPLIER=3 \
	    ctest --output-on-failure -j $(JOBS) \
	    -LE no_own_threads

# Without the CUDA backend and without MPI, as on machines without them: CI builds
# and tests Stoke with CUDA (the main build), emulated, and without (the tests
# labelled same_without_cuda left out: tests/CMakeLists.txt).
test-nocuda: deps
	cmake -S . -B $(NOCUDA_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_WERROR=ON \
	    -DSTOKE_CUDA=OFF -DSTOKE_MPI=OFF $(CMAKE_FLAGS)
	cmake --build $(NOCUDA_BUILD) -j $(JOBS)
	cd $(NOCUDA_BUILD) && ctest --output-on-failure -j $(JOBS) -LE same_without_cuda

# The libFuzzer targets (fuzz/CMakeLists.txt: clang, ASan+UBSan): each replays
# its regression inputs (tests/fuzz_regress) and fuzzes its committed seed
# corpus for FUZZ_SECONDS.
test-fuzz: deps
	CC=clang cmake -S fuzz -B $(FUZZ_BUILD) -DSTOKE_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	cd $(FUZZ_BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	./scripts/demo.sh $(BUILD)/stoke

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) $(NOCUDA_BUILD) $(FUZZ_BUILD) demo-data
