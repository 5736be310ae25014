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

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,plot]'
	touch $@

install: $(STAMP)

build: install
	$(BIN)/aclcap build

run: build
	$(BIN)/aclcap bench

lint: install
	$(BIN)/ruff check aclcap aclcap_ops tests scripts examples

test: build lint
	$(BIN)/python -m pytest --durations=15

clean:
	rm -rf build
