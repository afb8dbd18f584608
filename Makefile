# Two entry points that work on a fresh machine (Python 3.10+, a C++ compiler, network to PyPI):
#   make demo   set up .venv, list installed backends, run one kernel on every available target
#   make test   set up .venv and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU-only machines: a pinned CPU torch wheel; a bare `torch` requirement would pull GBs of CUDA packages.
TORCH  ?= torch==2.13.0

.PHONY: setup demo test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml examples/democpu/pyproject.toml plugins/*/pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q . ./examples/democpu ./plugins/tilelang_cuda ./plugins/tilelang_hip ./plugins/tilelang_tpu pytest ruff
	$(BIN)/tilelang-tpu toolchain install
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/tilecore list
	$(BIN)/python examples/demo.py

test: setup
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check tilecore tests examples plugins benchmarks

clean:
	rm -rf $(VENV)
