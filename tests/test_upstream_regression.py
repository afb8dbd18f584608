"""With tilecore active, tilelang's own targets behave exactly as without it.

Each case runs the same program twice in fresh interpreters, once with
autoload on and once with ``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``, and compares
the generated sources and results.  The CUDA case needs nvcc (device compile
works without a GPU) and is skipped without it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tcsupport import ADD_KERNEL, FakeSite

C_PROGRAM = (
    ADD_KERNEL
    + """
import json, sys
torch.manual_seed(0)
x, y = torch.randn(M, N), torch.randn(M, N)
k = tilelang.compile(add, target="c", out_idx=[-1])
out = k(x, y)
print("REPORT", json.dumps({"tilecore": "tilecore" in sys.modules, "backend": k.execution_backend,
      "source": k.get_kernel_source(), "host": k.get_host_source(), "sum": float(out.sum()),
      "err": float((out - (x * 2 + y)).abs().max())}))
"""
)

CUDA_PROGRAM = """
import json, sys
import tilelang, tilelang.language as T

def gemm(M, N, K, bm=128, bn=128, bk=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main

k = tilelang.compile(gemm(512, 512, 512), target={"kind": "cuda", "arch": "sm_90a"}, execution_backend="tvm_ffi", out_idx=[-1])
print("REPORT", json.dumps({"tilecore": "tilecore" in sys.modules, "target": str(k.target.export()["arch"]),
      "source": k.get_kernel_source(), "backend": k.execution_backend}))
"""


def run_both(site: FakeSite, program: str, tmp: Path) -> tuple[dict, dict]:
    reports = []
    for autoload_off in ("", "1"):
        result = site.run(program, TILECORE_DISABLE_PLUGIN_AUTOLOAD=autoload_off, TILELANG_CACHE_DIR=str(tmp / f"cache{autoload_off}"))
        assert result.returncode == 0, result.stderr[-4000:]
        line = [ln for ln in result.stdout.splitlines() if ln.startswith("REPORT ")][-1]
        reports.append(json.loads(line[len("REPORT ") :]))
    return reports[0], reports[1]


def test_c_target_unchanged(fake_site: FakeSite, tmp_path: Path) -> None:
    on, off = run_both(fake_site, C_PROGRAM, tmp_path)
    assert on["tilecore"] and not off["tilecore"]
    assert on["backend"] == off["backend"] == "cython"
    assert on["source"] == off["source"] and on["host"] == off["host"]
    assert on["sum"] == off["sum"] and on["err"] < 1e-5


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found: CUDA device compile cannot run here")
def test_cuda_sm90a_source_unchanged(fake_site: FakeSite, tmp_path: Path) -> None:
    on, off = run_both(fake_site, CUDA_PROGRAM, tmp_path)
    assert on["tilecore"] and not off["tilecore"]
    assert on["target"] == off["target"] == "sm_90a"
    assert on["backend"] == off["backend"] == "tvm_ffi"
    assert on["source"] == off["source"]
    assert "wgmma" in on["source"] or "tl::gemm" in on["source"]
