"""Test helpers for tilecore and backend test suites.

Every backend's tests need the same isolation: tilelang's kernel cache and
tilecore's per-user cache pointed at fresh per-test folders, so a test never
reads (or pollutes) the user's caches and a "cache hit" in a test is one the
test produced.  Import the fixture into a ``conftest.py`` to use it for every
test below that folder::

    from tilecore.kit.testing import tilecore_isolated_caches  # noqa: F401  (autouse fixture)

A backend that keeps a downloaded toolchain under tilecore's cache computes
that location *before* the isolation (at conftest import) and hands it to its
tests through its own variable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: The variables that decide where tilelang and tilecore keep their caches.
CACHE_VARIABLES = {"TILELANG_CACHE_DIR": "tilelang", "TILECORE_CACHE_DIR": "tilecore"}


@pytest.fixture(autouse=True)
def tilecore_isolated_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fresh tilelang and tilecore cache folders for this test (never the user's, undone by
    ``monkeypatch``); returns their parent."""
    root = tmp_path_factory.mktemp("caches")
    for variable, folder in CACHE_VARIABLES.items():
        monkeypatch.setenv(variable, str(root / folder))
    return root


__all__ = ["CACHE_VARIABLES", "tilecore_isolated_caches"]
