"""Fixtures of the tilelang-cuda tests: the shared test library."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def lib() -> ModuleType:
    """``tests/cuda_testlib.py`` (kernels, cubin helpers), imported by path."""
    name = "tilelang_cuda_testlib"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "cuda_testlib.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
