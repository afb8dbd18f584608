# Two entry points that work on a fresh machine (Python 3.10+, a C++ compiler, network to PyPI):
#   make demo   set up .venv, list installed backends, run one kernel on every available target
#   make test   set up .venv and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU-only machines: a pinned CPU torch wheel; a bare `torch` requirement would pull GBs of CUDA packages.
TORCH  ?= torch==2.13.0

.PHONY: setup demo test check lint clean redis-server test-tilelang-window

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml examples/democpu/pyproject.toml plugins/*/pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q ".[remote]" ./examples/democpu ./plugins/tilelang_cuda ./plugins/tilelang_hip ./plugins/tilelang_tpu pytest pytest-xdist ruff mypy import-linter
	$(BIN)/tilelang-tpu toolchain install
	touch $@

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
CHECKED_SOURCES := tilecore tests examples plugins benchmarks
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
test: setup redis-server check
	$(BIN)/lint-imports
	$(BIN)/pytest $(PYTEST_WORKERS)
	$(MAKE) test-tilelang-window

# The tested tilelang window (docs/tilelang-releases.md): `make test` runs the newest release in
# .venv; this runs the conformance suite (democpu, tpu) and the backends' suites against the
# release before, in a venv of its own.
WINDOW_TILELANG ?= 0.1.14
WINDOW_VENV     := .venv-tilelang-$(WINDOW_TILELANG)
WINDOW_BIN      := $(WINDOW_VENV)/bin

$(WINDOW_VENV)/.installed: pyproject.toml examples/democpu/pyproject.toml plugins/*/pyproject.toml
	$(PYTHON) -m venv $(WINDOW_VENV)
	$(WINDOW_BIN)/pip install -q --upgrade pip
	$(WINDOW_BIN)/pip install -q "$(TORCH)"
	$(WINDOW_BIN)/pip install -q "tilelang==$(WINDOW_TILELANG)" ".[remote]" ./examples/democpu ./plugins/tilelang_cuda ./plugins/tilelang_hip ./plugins/tilelang_tpu pytest pytest-xdist hypothesis
	touch $@

test-tilelang-window: $(WINDOW_VENV)/.installed redis-server
	$(WINDOW_BIN)/python -c "import tilelang; assert tilelang.__version__.startswith('$(WINDOW_TILELANG)'), tilelang.__version__"
	$(WINDOW_BIN)/pytest -p no:cacheprovider --pyargs tilecore.conformance --tilecore-target=democpu
	$(WINDOW_BIN)/pytest -p no:cacheprovider --pyargs tilecore.conformance --tilecore-target=tpu
	$(WINDOW_BIN)/pytest $(PYTEST_WORKERS) plugins tests/test_tilelang_compat.py

lint: check

clean:
	rm -rf $(VENV) $(WINDOW_VENV)
