"""The light half of the conformance pytest plugin: options and collection only.

This file is installed at the top level of site-packages as the module
``_tilecore_conformance`` (pyproject.toml: ``force-include``; an editable
install copies it, so reinstall after editing it).  pytest loads it in every
session of an environment with tilecore installed (entry point
``pytest11: tilecore.conformance``), so it imports nothing but the standard
library and pytest: importing ``tilecore`` would import tilelang and torch
(seconds).  The heavy half, :mod:`tilecore.conformance.plugin`, is registered
only when ``--tilecore-target`` is given.

``pytest -p tilecore.conformance`` registers :mod:`tilecore.conformance`,
which re-exports these hooks; the entry point has the same name, so pytest
loads one or the other, never both.

PYTEST_DONT_REWRITE: ``tilecore.conformance`` imports this module before
pytest could rewrite it, and it has no assertions.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import pytest

PLUGIN_NAME = "tilecore.conformance.plugin"
CASE_PREFIX = "cases_"


@functools.lru_cache(maxsize=1)
def cases_dir() -> Path | None:
    """The folder holding the bundled case files, found without importing tilecore."""
    spec = importlib.util.find_spec("tilecore")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "conformance"
        if (candidate / "__init__.py").is_file():
            return candidate.resolve()
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tilecore", "tilecore backend conformance")
    group.addoption(
        "--tilecore-target",
        default=None,
        metavar="TARGET",
        help="run the tilecore conformance cases against TARGET (e.g. democpu, 'acme:x2'); "
        "with no test paths given, the bundled cases are collected",
    )
    group.addoption(
        "--tilecore-json",
        default=None,
        metavar="PATH",
        help="also write the conformance results (case x status) as JSON to PATH",
    )
    group.addoption(
        "--tilecore-kernel-style",
        default=None,
        choices=("portable", "gpu"),
        help="kernel forms for reductions and GEMM: 'portable' (local buffers, what tilelang's portable CPU "
        "lowering accepts) or 'gpu' (shared operands, fragment accumulators). Default: 'gpu' for targets "
        "delegated upstream to a GPU kind, else 'portable'",
    )
    group.addoption(
        "--tilecore-cache-dir",
        default=None,
        metavar="DIR",
        help="TILELANG_CACHE_DIR for the session (default: a fresh private directory removed "
        "at the end, so no stale kernel is ever served)",
    )


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """With ``--tilecore-target`` and no test paths, collect the bundled cases."""
    namespace = early_config.known_args_namespace
    if getattr(namespace, "tilecore_target", None) and not getattr(namespace, "file_or_dir", None):
        folder = cases_dir()
        if folder is not None:
            args.append(str(folder))


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("tilecore_target", None) and not config.pluginmanager.has_plugin(PLUGIN_NAME):
        from tilecore.conformance import plugin

        config.pluginmanager.register(plugin, PLUGIN_NAME)


class ConformanceModule(pytest.Module):
    """A bundled case file, collected whatever the project's ``python_*`` settings say."""

    def funcnamefilter(self, name: str) -> bool:
        return name.startswith("test_")

    def classnamefilter(self, name: str) -> bool:
        return name.startswith("Test")


def is_case_file(path: Path) -> bool:
    folder = cases_dir()
    return folder is not None and path.suffix == ".py" and path.name.startswith(CASE_PREFIX) and path.parent.resolve() == folder


def pytest_collect_file(file_path: Path, parent: Any) -> pytest.Module | None:
    if not file_path.name.startswith(CASE_PREFIX) or not is_case_file(file_path):
        return None
    if not parent.config.getoption("tilecore_target", None):
        raise pytest.UsageError(
            "the tilecore conformance cases need a target: pass --tilecore-target=NAME. "
            f"Installed tilecore backends: {installed_backends()}."
        )
    return ConformanceModule.from_parent(parent, path=file_path)


def installed_backends() -> str:
    """``name (distribution version)`` of every ``tilecore.backends`` entry point, from metadata only."""
    from importlib.metadata import entry_points

    names = []
    for ep in entry_points(group="tilecore.backends"):
        dist = ep.dist
        names.append(f"{ep.name} ({dist.metadata['Name']} {dist.version})" if dist is not None else ep.name)
    return ", ".join(sorted(set(names))) or "<none>"
