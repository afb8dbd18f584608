"""Per-element code outside ``T.Parallel`` on the BM1690 emulator, against torch on random
data: scalar loads and stores of tile and tensor elements in ``T.serial`` loops,
``T.alloc_var`` accumulators, a hand-written GEMM, scalar atomics, runtime-length loops and
``while``; other targets' hints ignored; per-thread indexing refused by name.

Every run checks that the inputs are left untouched.
"""

from __future__ import annotations

import pytest
import tilelang
import torch
import tpu_scalar_kernels as K

from tilecore import TilecoreError

pytestmark = pytest.mark.usefixtures("toolchain")


def _run(kernel: object, *inputs: object) -> object:
    before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    out = kernel(*inputs)  # type: ignore[operator]
    for original, value in zip(before, inputs, strict=True):
        if isinstance(value, torch.Tensor):
            assert torch.equal(original, value), "the kernel wrote one of its inputs"
    return out


def _rand(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    if dtype.startswith("int"):
        return torch.randint(-50, 50, shape, dtype=getattr(torch, dtype))
    return torch.randn(shape, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_other_targets_hints_are_ignored(dtype: str) -> None:
    """T.use_swizzle, T.annotate_layout, T.annotate_min_blocks_per_sm, T.annotate_restrict_buffers,
    T.disable_warp_group_reg_alloc, T.no_set_max_nreg and T.sync_threads change nothing on tpu."""
    M, N = 130, 96
    kernel = tilelang.compile(K.hinted_scale(M, N, 64, 64, dtype), target="tpu", out_idx=[-1])
    a = _rand((M, N), dtype)
    torch.testing.assert_close(_run(kernel, a), a * 2, rtol=0, atol=0)


def test_thread_binding_gemv_is_refused_by_name() -> None:
    with pytest.raises(TilecoreError) as info:
        tilelang.compile(K.thread_gemv(128, 64, 64), target="tpu")
    text = str(info.value)
    assert "tilelang-tpu" in text and "per-thread indexing" in text and "thread index tn" in text
    assert "target `c`" not in text and "report it to the authors" not in text
    assert "T.reduce_sum" in text  # the rewrite
