"""Fixtures of the tilelang-tpu tests.

Every test gets its own tilelang and tilecore cache directories
(``tilecore.kit.testing.tilecore_isolated_caches``, imported below and by the repository's root conftest).  The SophGo
toolchain, however, is found the way users find it: ``$PPL_PROJECT_ROOT``, an
installed ``tpu_mlir``, or ``tilelang-tpu toolchain install``.  The install
location is computed *before* the cache isolation and handed to the tests
through ``TILELANG_TPU_TOOLCHAIN_DIR``, so a toolchain CI installed with the
plugin's own command is found even though the kernel cache is per test.

One part of the cache is shared: the kernel libraries (``<tilecore cache>/tpu/kernels``), the
build store of :mod:`tilelang_tpu.build`.  Its key is everything that decides a library's bytes
(the PPL source, chip, mode, toolchain and plugin version), and every reuse verifies the file
against its build record, so sharing it is what a user's cache does after a tilelang upgrade:
the same PPL is not compiled and linked again.  It is where a tpu test spends most of its time
(ppl-compile and the link, about 1.4 s of 2.2 s), and many tests and both tilelang releases of
the window build the same programs.  It is the run's own folder (``TILELANG_TPU_TEST_KERNEL_STORE``,
set by ``make test`` for the whole run and the window, else one per pytest run), never the
user's.  A test that counts builds or damages a library marks itself ``private_kernel_store``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tilelang_tpu import setup

from tilecore import ToolchainError

# Fresh tilelang and tilecore caches for every test: the repository's root conftest imports the same
# fixture; importing it here too lets the tests run from the sdist, which has no root conftest.
from tilecore.kit.testing import tilecore_isolated_caches  # noqa: F401

#: Where `tilelang-tpu toolchain install` put toolchains for the user running the tests.
REAL_INSTALL_ROOT = setup.install_root()
PPL_DIR = Path(__file__).parent / "ppl"

# tpu_kernels.py (kernel factories shared by the codegen tests) is imported by name;
# --import-mode=importlib does not put test folders on sys.path by itself.
sys.path.insert(0, str(Path(__file__).parent))


#: A folder for the kernel libraries of the whole run (``make test`` sets it for the run and the window).
SHARED_STORE_ENV = "TILELANG_TPU_TEST_KERNEL_STORE"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "private_kernel_store: the test builds its kernel libraries in its own cache (it counts builds or damages one)"
    )


@pytest.fixture(scope="session")
def shared_kernel_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's kernel-library store: ``$TILELANG_TPU_TEST_KERNEL_STORE``, else a folder of this
    pytest run (under pytest-xdist, the one folder its workers share)."""
    explicit = os.environ.get(SHARED_STORE_ENV)
    base = tmp_path_factory.getbasetemp()
    store = Path(explicit) if explicit else (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "tpu-kernels"
    store.mkdir(parents=True, exist_ok=True)
    return store


@pytest.fixture(autouse=True)
def _real_toolchain(
    tilecore_isolated_caches: Path,  # noqa: F811  (the fixture imported above)
    shared_kernel_store: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the cache isolation (root conftest): the toolchain stays the user's installed one, and
    the kernel libraries are the run's shared store unless the test is marked ``private_kernel_store``."""
    if request.node.get_closest_marker("private_kernel_store") is None:
        tpu_cache = tilecore_isolated_caches / "tilecore" / "tpu"
        tpu_cache.mkdir(parents=True, exist_ok=True)
        (tpu_cache / "kernels").symlink_to(shared_kernel_store, target_is_directory=True)
    monkeypatch.setenv(setup.TOOLCHAIN_DIR_ENV, str(REAL_INSTALL_ROOT))
    # Tests compile between launches (seconds on this machine): keep the emulator worker across
    # them instead of restarting it after the 2 s default (tests of the idle stop set their own).
    monkeypatch.setenv("TILELANG_TPU_IDLE_TIMEOUT", "30")
    monkeypatch.delenv("TILELANG_TPU_MODE", raising=False)


@pytest.fixture
def toolchain() -> setup.TpuToolchain:
    """The real SophGo toolchain, or a skip that says how to get it."""
    try:
        found = setup.find_toolchain()
    except ToolchainError as err:
        pytest.skip(f"no SophGo PPL toolchain ({err}); run `tilelang-tpu toolchain install` to enable these tests")
    return found


@pytest.fixture
def ppl() -> object:
    """``ppl(name)``: text of a hand-written kernel in tests/ppl/ (written for these tests, following abi.py)."""
    return lambda name: (PPL_DIR / name).read_text()
