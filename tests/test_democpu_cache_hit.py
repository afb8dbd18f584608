"""democpu on a tilelang disk-cache hit: the verified library is adopted, the C++ compiler is not run.

A remote-cache hit installs tilelang's entry (library included) into an empty local cache on a
machine whose tilecore artifact store is empty too; the backend must load the kernel from that
entry's verified library instead of compiling the source again (seconds: the whole cost of the
hit, docs/benchmarks/cache.md).  Two real processes share one tilelang cache directory and have
separate tilecore caches; the second one must serve a correct kernel without compiling.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import torch, tilelang
import tilelang.language as T

@T.prim_func
def affine(A: T.Tensor((64, 48), "float32"), C: T.Tensor((64, 48), "float32")):
    with T.Kernel(2, threads=1) as bx:
        a = T.alloc_shared((32, 48), "float32")
        T.copy(A[bx * 32, 0], a)
        for i, j in T.Parallel(32, 48):
            a[i, j] = a[i, j] * 2 + 1
        T.copy(a, C[bx * 32, 0])

k = tilelang.compile(affine, target="democpu", out_idx=[-1])
x = torch.randn(64, 48)
x0 = x.clone()
ok = torch.allclose(k(x), x * 2 + 1) and torch.equal(x, x0)
print("RESULT", "hit" if k.adapter.kernel.library_path else "compiled", ok)
"""


def run(tmp_path: Path, tilecore_cache: str) -> str:
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "tilelang"), TILECORE_CACHE_DIR=str(tmp_path / tilecore_cache))
    env.pop("TILECORE_REMOTE_CACHE", None)
    script = tmp_path / "hit.py"  # a file: @T.prim_func reads its function's source
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT")][-1]


def entries(tilecore_cache: Path) -> list[Path]:
    return [p for p in (tilecore_cache / "democpu" / "kernels").iterdir() if p.is_dir() and not p.name.startswith(".")]


def test_a_cache_hit_adopts_the_verified_library_instead_of_compiling(tmp_path: Path) -> None:
    assert run(tmp_path, "tilecore-a") == "RESULT compiled True"
    (built,) = entries(tmp_path / "tilecore-a")
    assert (built / "kernel.cc").is_file()  # the first process compiled the source
    assert run(tmp_path, "tilecore-b") == "RESULT hit True"
    (adopted,) = entries(tmp_path / "tilecore-b")
    assert not (adopted / "kernel.cc").exists(), "the second process ran the compiler instead of adopting the library"
    assert adopted.name == built.name
    assert (adopted / f"lib{adopted.name}.so").read_bytes() == (built / f"lib{built.name}.so").read_bytes()
