"""``tilecore.require_toolchain``: the non-Optional form of ``setup_target`` for backend code."""

from __future__ import annotations

from types import ModuleType

import pytest

import tilecore
from tilecore import TargetSpec, Toolchain, ToolchainError, hookimpl
from tilecore._registry import Registry
from tilecore._registry.discovery import PluginPolicy

FOUND = Toolchain(name="tc", version="1.2", location="/opt/tc/bin/tc", found_by="test")


def _module(name: str, **hooks: object) -> ModuleType:
    module = ModuleType(name)
    module.__dict__.update(tilecore_api_version="1.0", **hooks)
    return module


@hookimpl
def _declare_nosetup() -> list[TargetSpec]:
    return [TargetSpec("tcnosetup", "a backend without a setup hook")]


@hookimpl
def _declare_withsetup() -> list[TargetSpec]:
    return [TargetSpec("tcwithsetup", "a backend with a setup hook")]


@hookimpl
def _setup(target: tilecore.ResolvedTarget) -> Toolchain:
    return FOUND


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Registry:
    registry = Registry(PluginPolicy.from_env({}), builtin_kinds=lambda: ("c",))
    registry.register(_module("tcnosetup", tilecore_declare_targets=_declare_nosetup))
    registry.register(_module("tcwithsetup", tilecore_declare_targets=_declare_withsetup, tilecore_setup=_setup))
    monkeypatch.setattr(tilecore._activation, "_registry", registry)
    return registry


def test_require_toolchain_returns_the_setup_result(registry: Registry) -> None:
    toolchain: Toolchain = tilecore.require_toolchain("tcwithsetup")
    assert toolchain == FOUND
    assert tilecore.setup_target("tcwithsetup") == FOUND


def test_require_toolchain_refuses_a_backend_without_setup_hook(registry: Registry) -> None:
    assert tilecore.setup_target("tcnosetup") is None  # unchanged: the conformance suite relies on it
    with pytest.raises(ToolchainError, match=r"'tcnosetup'.*<in-process>.*no tilecore_setup hook.*Fix: implement"):
        tilecore.require_toolchain("tcnosetup")
