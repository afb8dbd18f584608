"""Repository-wide test setup (applies to tests/ and every plugin's tests)."""

from __future__ import annotations

import pytest
from tcsupport import thin_grid  # tests/ is on pytest's pythonpath

# Every test gets its own tilelang and tilecore cache folders (the fixture every backend can use).
from tilecore.kit.testing import tilecore_isolated_caches  # noqa: F401


@pytest.fixture(autouse=True)
def _private_tmpdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point TMPDIR at pytest's managed temp tree for every test and the processes it starts.

    Some toolchains (upstream's cython adapter for target "c", hipcc) leave build files in
    the temp dir; they must not pile up in /tmp.
    """
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmpdir")))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--max-cases-per-test",
        type=int,
        default=0,
        metavar="K",
        help="run at most K cases of each parametrised test, spread over its grid (its first, last and evenly "
        "between); 0 (default) runs them all.  `make test-tilelang-window` uses it: see docs/tilelang-releases.md.",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    most = config.getoption("--max-cases-per-test")
    if most < 1:
        return
    kept = set(thin_grid([item.nodeid for item in items], most))
    deselected = [item for item in items if item.nodeid not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.nodeid in kept]
