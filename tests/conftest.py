"""Shared fixtures: real installed test distributions (cache isolation: tilecore.kit.testing, via the root conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tcsupport import FakeSite


@pytest.fixture
def fake_site(tmp_path: Path) -> FakeSite:
    site = tmp_path / "site"
    site.mkdir()
    return FakeSite(site)
