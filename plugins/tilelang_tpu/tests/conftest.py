"""Fixtures of the tilelang-tpu tests.

Every test gets its own tilelang and tilecore cache directories
(``tilecore.kit.testing.tilecore_isolated_caches``, from the repository's root conftest).  The SophGo
toolchain, however, is found the way users find it: ``$PPL_PROJECT_ROOT``, an
installed ``tpu_mlir``, or ``tilelang-tpu toolchain install``.  The install
location is computed *before* the cache isolation and handed to the tests
through ``TILELANG_TPU_TOOLCHAIN_DIR``, so a toolchain CI installed with the
plugin's own command is found even though the kernel cache is per test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tilelang_tpu import setup

from tilecore import ToolchainError

#: Where `tilelang-tpu toolchain install` put toolchains for the user running the tests.
REAL_INSTALL_ROOT = setup.install_root()
PPL_DIR = Path(__file__).parent / "ppl"

# tpu_kernels.py (kernel factories shared by the codegen tests) is imported by name;
# --import-mode=importlib does not put test folders on sys.path by itself.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _real_toolchain(tilecore_isolated_caches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the cache isolation (root conftest): the toolchain stays the user's installed one."""
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
