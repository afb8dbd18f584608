"""Repository-wide test setup (applies to tests/ and every plugin's tests)."""

from __future__ import annotations

import pytest

# Every test gets its own tilelang and tilecore cache folders (the fixture every backend can use).
from tilecore.kit.testing import tilecore_isolated_caches  # noqa: F401


@pytest.fixture(autouse=True)
def _private_tmpdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point TMPDIR at pytest's managed temp tree for every test and the processes it starts.

    Some toolchains (upstream's cython adapter for target "c", hipcc) leave build files in
    the temp dir; they must not pile up in /tmp.
    """
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmpdir")))
