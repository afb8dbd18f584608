"""Shared fixtures: isolated caches and real installed test distributions."""

from __future__ import annotations

from pathlib import Path

import pytest
from tcsupport import FakeSite


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own tilelang and tilecore cache dirs (never the user's)."""
    root = tmp_path_factory.mktemp("caches")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root / "tilelang"))
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(root / "tilecore"))



@pytest.fixture
def fake_site(tmp_path: Path) -> FakeSite:
    site = tmp_path / "site"
    site.mkdir()
    return FakeSite(site)
