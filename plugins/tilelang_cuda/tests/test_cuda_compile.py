"""Compile-only tests: real cubins from nvcc through ``tilelang.compile`` with tilecore active (no GPU needed)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tilelang
from tilelang_cuda.setup import locate_nvcc

pytestmark = pytest.mark.skipif(locate_nvcc() is None, reason="needs nvcc (CUDA toolkit)")
HERE = Path(__file__).resolve().parent


def _cache() -> Path:
    return Path(os.environ["TILELANG_CACHE_DIR"])


def _cubins_or_skip(lib: Any) -> list[Path]:
    """The cubins in tilelang's disk cache; a skip (capability, not version) where the installed
    tilelang keeps none there to inspect (tilelang 0.1.14's cache holds no ``.cubin`` file)."""
    cubins: list[Path] = lib.cubins(_cache())
    if not cubins:
        pytest.skip("the installed tilelang's disk cache keeps no .cubin file to inspect")
    return cubins


def test_cuda_compile_only_sm90a(lib) -> None:
    kernel = tilelang.compile(lib.gemm(256, 256, 256), target="cuda:sm_90a", out_idx=[-1])
    assert kernel.target.kind.name == "cuda" and str(kernel.target.attrs["arch"]) == "sm_90a"
    assert kernel.execution_backend == "tvm_ffi"
    source = kernel.get_kernel_source()
    assert re.search(r"__global__ void __launch_bounds__\(\d+, 1\) main_kernel\(", source)
    assert "wgmma" in source and "CUtensorMap" in source, "the Hopper path (wgmma, TMA) must be chosen for sm_90a"
    [cubin] = _cubins_or_skip(lib)
    assert lib.cubin_sm(cubin) == 90 and cubin.stat().st_size > 10_000
    # The plugin owns tensor supply and timing of this target.
    assert type(kernel.get_profiler()).__name__ == "TilecoreProfiler"


def test_cuda_compile_only_sm80(lib) -> None:
    kernel = tilelang.compile(lib.gemm(256, 256, 256), target={"kind": "cuda", "arch": "sm_80"}, out_idx=[-1])
    assert str(kernel.target.attrs["arch"]) == "sm_80"
    source = kernel.get_kernel_source()
    assert "main_kernel(" in source and "wgmma" not in source and "mma" in source
    [cubin] = _cubins_or_skip(lib)
    assert lib.cubin_sm(cubin) == 80


def test_cuda_same_kernel_as_upstream_alone(lib) -> None:
    """With tilecore off (subprocess, TILECORE_DISABLE_PLUGIN_AUTOLOAD=1) tilelang builds the same target, source
    and cubin: the in-process compile through the plugin finds upstream's cubin already cached under the same key."""
    code = textwrap.dedent(
        f"""
        import hashlib, json, sys
        sys.path.insert(0, {str(HERE)!r})
        import tilelang, cuda_testlib
        kernel = tilelang.compile(cuda_testlib.gemm(256, 256, 256), target={{"kind": "cuda", "arch": "sm_90a"}}, out_idx=[-1])
        print(json.dumps({{"tilecore": "tilecore" in sys.modules, "target": str(kernel.target),
                          "source": hashlib.sha256(kernel.get_kernel_source().encode()).hexdigest()}}))
        """
    )
    env = {**os.environ, "TILECORE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, cwd=_cache().parent)
    assert result.returncode == 0, result.stderr[-3000:]
    upstream = json.loads(result.stdout.strip().splitlines()[-1])
    assert upstream["tilecore"] is False, "the subprocess must run upstream tilelang alone"
    upstream_cubins = _cubins_or_skip(lib)
    assert len(upstream_cubins) == 1

    kernel = tilelang.compile(lib.gemm(256, 256, 256), target={"kind": "cuda", "arch": "sm_90a"}, out_idx=[-1])
    assert type(kernel.get_profiler()).__name__ == "TilecoreProfiler", "this compile must go through the plugin"
    assert str(kernel.target) == upstream["target"]
    assert hashlib.sha256(kernel.get_kernel_source().encode()).hexdigest() == upstream["source"]
    assert lib.cubins(_cache()) == upstream_cubins, "same source and nvcc flags must hit upstream's cubin cache entry"
