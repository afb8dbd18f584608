"""Row reductions of rows shorter than one execution unit (64 bytes) on the BM1690 emulator
against torch (bug K1): PPL's ``quick_pooling`` killed the emulator on 32-byte rows (8 fp32 or
16 fp16/bf16 columns: a MoE router over 8 experts).  Every reduction kind, tile heights 1, 63,
64, 65 and 128, row lengths around the EU; inputs checked untouched."""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

_TORCH = {
    "max": lambda x: x.amax(dim=1),
    "min": lambda x: x.amin(dim=1),
    "sum": lambda x: x.sum(dim=1),
    "abssum": lambda x: x.abs().sum(dim=1),
    "absmax": lambda x: x.abs().amax(dim=1),
}


def reduce_kernel(M: int, N: int, BM: int, dtype: str, kind: str) -> Any:
    @T.prim_func
    def row_reduce(X: T.Tensor((M, N), dtype), unused: T.Tensor((2,), "float32"), Y: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            x = T.alloc_fragment((BM, N), dtype)
            y = T.alloc_fragment((BM,), dtype)
            T.copy(X[bx * BM, 0], x)
            getattr(T, f"reduce_{kind}")(x, y, dim=1)
            T.copy(y, Y[bx * BM])

    return row_reduce


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype", "kind"),
    [
        (1, 8, 1, "float32", "sum"),
        (130, 8, 63, "float32", "max"),
        (100, 8, 64, "float32", "min"),
        (65, 16, 65, "float16", "sum"),
        (130, 16, 128, "bfloat16", "max"),
        (64, 16, 64, "float16", "absmax"),
        (70, 5, 64, "float32", "abssum"),
        (64, 9, 64, "bfloat16", "sum"),
    ],
)
def test_short_row_reduction_matches_torch(M: int, N: int, BM: int, dtype: str, kind: str) -> None:
    x = torch.randn(M, N).to(FLOATS[dtype])
    y = torch.zeros(M, dtype=FLOATS[dtype])
    kernel = tilelang.compile(reduce_kernel(M, N, BM, dtype, kind), target="tpu")
    run_checked(kernel, x, torch.zeros(2), y, inputs=(0, 1))
    tol = 0 if kind in ("max", "min", "absmax") else 2e-2
    torch.testing.assert_close(y.float(), _TORCH[kind](x.float()).to(FLOATS[dtype]).float(), rtol=tol, atol=tol)
