"""Shared fixtures: real installed test distributions (cache isolation: tilecore.kit.testing, via the root conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tcsupport import FakeSite

from tilecore.remote.localserver import LocalRedisServer, find_binary


@pytest.fixture
def fake_site(tmp_path: Path) -> FakeSite:
    site = tmp_path / "site"
    site.mkdir()
    return FakeSite(site)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedisServer]:
    """A real redis-server on a loopback port for the whole session (the remote-cache tests)."""
    if find_binary() is None:
        pytest.skip("no redis-server binary on PATH or at /usr/bin/redis-server (make test installs Debian's redis-server)")
    with LocalRedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server
