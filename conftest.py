"""Repository-wide test setup (applies to tests/ and every plugin's tests).

It imports nothing of tests/: pytest also loads it for `pytest --pyargs tilecore.conformance` run
from outside the repository against an editable install, where tests/ is not on the path.
"""

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--max-cases-per-test",
        type=int,
        default=0,
        metavar="K",
        help="run at most K cases of each parametrised test, spread over its grid (its first, last and evenly "
        "between); 0 (default) runs them all.  `make test-tilelang-window` uses it: see docs/tilelang-releases.md.",
    )


def thin_grid(nodeids: list[str], most: int) -> list[str]:
    """The node ids kept when each test function runs at most ``most`` of its cases (``most`` < 1: all).

    A function's cases keep their collection order; the kept ones are its first, its last and evenly
    spaced ones between, so the ends of a grid (its smallest and largest sizes, first and last dtypes)
    always run.
    """
    if most < 1:
        return list(nodeids)
    cases: dict[str, list[str]] = {}
    for nodeid in nodeids:
        cases.setdefault(nodeid.partition("[")[0], []).append(nodeid)
    kept: set[str] = set()
    for grid in cases.values():
        if len(grid) <= most:
            kept.update(grid)
        else:
            last = len(grid) - 1
            kept.update(grid[round(i * last / max(most - 1, 1))] for i in range(most))
    return [nodeid for nodeid in nodeids if nodeid in kept]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    most = config.getoption("--max-cases-per-test")
    if most < 1:
        return
    kept = set(thin_grid([item.nodeid for item in items], most))
    deselected = [item for item in items if item.nodeid not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.nodeid in kept]
