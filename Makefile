# Two entry points that work on a fresh machine (Python 3.11+, a C++ compiler, network to PyPI):
#   make demo   set up .venv, list installed backends, run one kernel on every available target
#   make test   set up .venv and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# PyTorch: TORCH is the requirement, TORCH_INDEX an optional index URL for it.  On a machine without
# a GPU use PyTorch's CPU wheels, or pip pulls the CUDA build and ~15 nvidia-* packages (GBs):
#   make TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Changing either reinstalls torch in an existing .venv (the values are recorded in $(VENV)/.torch).
# CI leaves TORCH_INDEX empty: this machine's pip finds its preseeded CPU wheel of torch==2.13.0.
TORCH       ?= torch==2.13.0
TORCH_INDEX ?=
DIST        ?= dist

.PHONY: setup demo test check lint clean redis-server dist release-check FORCE test-tilelang-window

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The torch request as last installed; rewritten (so torch is reinstalled) only when TORCH/TORCH_INDEX change.
TORCH_SPEC := $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
$(VENV)/.torch: $(BIN)/python FORCE
	@if [ "$$(cat $@ 2>/dev/null)" != "$(TORCH_SPEC)" ]; then \
	  $(BIN)/pip install -q --upgrade pip && \
	  echo "installing $(TORCH_SPEC)" && $(BIN)/pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) && \
	  echo "$(TORCH_SPEC)" > $@; fi

# Editable installs: the venv always runs the source tree (no stale installed copy; reinstalled when a
# pyproject changes, e.g. its entry points).  build/twine/check-wheel-contents serve `make dist`/release-check.
$(VENV)/.installed: $(VENV)/.torch pyproject.toml examples/democpu/pyproject.toml plugins/*/pyproject.toml
	$(BIN)/pip install -q -e ".[remote,ray]" -e ./examples/democpu -e ./plugins/tilelang_cuda -e ./plugins/tilelang_hip -e ./plugins/tilelang_tpu \
	  pytest pytest-xdist hypothesis ruff mypy import-linter build twine check-wheel-contents
	$(BIN)/tilelang-tpu toolchain install
	touch $@

FORCE:

setup: $(VENV)/.installed

demo: setup
	$(BIN)/tilecore list
	$(BIN)/python examples/demo.py

# The remote-cache tests start a real redis-server; install Debian's package when none is present
# (CI runs as root).  Without one they are skipped with the reason.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } || \
	  echo "warning: redis-server could not be installed; tests/test_remote_cache.py will be skipped"

# Static checks first (seconds), then the whole test suite.  mypy --strict covers the core and every backend.
CHECKED_SOURCES := tilecore tests examples plugins benchmarks tools
TYPED_PACKAGES  := tilecore plugins/tilelang_cuda/tilelang_cuda plugins/tilelang_hip/tilelang_hip plugins/tilelang_tpu/tilelang_tpu \
                   examples/democpu/tilelang_democpu

check: setup
	$(BIN)/ruff check $(CHECKED_SOURCES)
	$(BIN)/ruff format --check $(CHECKED_SOURCES)
	$(BIN)/mypy $(TYPED_PACKAGES)

# The suite runs on every core up to 4 (pytest-xdist): most of its time is single-threaded
# compilers and emulator launches, and each test has its own caches (tilecore.kit.testing).
# `make test PYTEST_WORKERS=` runs it in one process.
PYTEST_WORKERS ?= -n auto --maxprocesses=4

# The layers of docs/architecture.md ("Layers"), as import-linter contracts (.importlinter).
# The tpu tests share one store of kernel libraries (plugins/tilelang_tpu/tests/conftest.py): a folder
# of this run, the window included (the same PPL builds the same library under either tilelang),
# removed when the run ends.
test: setup redis-server check release-check
	$(BIN)/lint-imports --no-cache  # its cache would be written into the working directory
	store=$$(mktemp -d "$${TMPDIR:-/tmp}/tilecore-test-kernels.XXXXXX") && \
	  trap 'rm -rf "$$store"' EXIT && trap 'exit 130' INT TERM && \
	  export TILELANG_TPU_TEST_KERNEL_STORE="$$store" && \
	  $(BIN)/pytest $(PYTEST_WORKERS) && $(MAKE) test-tilelang-window

# The tested tilelang window (docs/tilelang-releases.md): `make test` runs the newest release in
# .venv; this runs the conformance suite (democpu, tpu) and the backends' suites against the
# release before, in a venv of its own.
WINDOW_TILELANG ?= 0.1.14
WINDOW_VENV     := .venv-tilelang-$(WINDOW_TILELANG)
WINDOW_BIN      := $(WINDOW_VENV)/bin

$(WINDOW_VENV)/.installed: pyproject.toml examples/democpu/pyproject.toml plugins/*/pyproject.toml
	$(PYTHON) -m venv $(WINDOW_VENV)
	$(WINDOW_BIN)/pip install -q --upgrade pip
	$(WINDOW_BIN)/pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(WINDOW_BIN)/pip install -q "tilelang==$(WINDOW_TILELANG)" ".[remote]" ./examples/democpu ./plugins/tilelang_cuda ./plugins/tilelang_hip ./plugins/tilelang_tpu pytest pytest-xdist hypothesis
	touch $@

# Backend test files whose subject tilelang is not on the path of, so they cannot differ between
# releases (docs/tilelang-releases.md, "What the window runs"): hand-written PPL on the emulator,
# the emulator workers' life cycle, the soak (process kills), the device lock and the SophGo
# toolchain's discovery.  They run once, in `make test`; `make test-tilelang-window WINDOW_SAME=`
# runs them here too.
TPU_TESTS   := plugins/tilelang_tpu/tests
WINDOW_SAME ?= $(TPU_TESTS)/test_tpu_runtime.py $(TPU_TESTS)/test_tpu_worker_lifecycle.py $(TPU_TESTS)/test_tpu_soak.py \
               $(TPU_TESTS)/test_tpu_device_lock.py $(TPU_TESTS)/test_tpu_setup.py

# The window runs every backend test function, each parametrised one on at most WINDOW_CASES cases
# spread over its grid (first, middle, last); `make test` runs every case on the newest release.
# Why that is enough: docs/tilelang-releases.md, "What the window runs".  WINDOW_CASES=0 runs them all.
WINDOW_CASES ?= 3

test-tilelang-window: $(WINDOW_VENV)/.installed redis-server
	$(WINDOW_BIN)/python -c "import tilelang; assert tilelang.__version__.startswith('$(WINDOW_TILELANG)'), tilelang.__version__"
	$(WINDOW_BIN)/pytest -p no:cacheprovider --pyargs tilecore.conformance --tilecore-target=democpu
	$(WINDOW_BIN)/pytest -p no:cacheprovider --pyargs tilecore.conformance --tilecore-target=tpu
	$(WINDOW_BIN)/pytest $(PYTEST_WORKERS) --max-cases-per-test=$(WINDOW_CASES) plugins tests/test_tilelang_compat.py \
	  $(addprefix --ignore=,$(WINDOW_SAME))

# An sdist and a wheel of all five distributions in $(DIST)/ (tools/release.py; RELEASING.md).
dist: setup
	$(BIN)/python tools/release.py dist --out $(DIST)

# What a maintainer checks before an upload (twine, check-wheel-contents, wheel-from-sdist, a fresh
# venv running a democpu and a tpu kernel from the wheels alone); part of `make test`, so CI runs it.
release-check: dist
	$(BIN)/python tools/release.py check --dist $(DIST) --torch "$(TORCH)" $(if $(TORCH_INDEX),--torch-index $(TORCH_INDEX))

lint: check

clean:
	rm -rf $(VENV) $(DIST) $(WINDOW_VENV)
