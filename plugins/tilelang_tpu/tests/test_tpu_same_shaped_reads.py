"""Index expressions that read two same-shaped buffers at the same index are different indices.

``tvm.ir.structural_equal`` maps the buffers of two loads onto each other, so it equates
``o[i, j + r0[0]]`` with ``o[i, j + r1[0]]``; the code generator compares indices with
``codegen.ir.same_exprs`` instead (the same confusion once read the wrong tensor in a staged
read: ``test_tpu_differential_found.py``).  One test per place that compares indices:

* an ``if``/``else`` in ``T.Parallel`` whose branches store at offsets read from two scalars
  (``codegen.emit.branches``: merged into one store, the else-branch's values landed at the
  then-branch's offset -- a wrong result, run against torch here);
* a ``T.Parallel`` that stores ``x[i, p0[j]]`` and reads ``x[i, p1[j]]`` (``codegen.emit.serial_ops``:
  its iterations read each other's writes, so it is refused by name, not run in one order);
* two ``T.atomic_add`` forms into one tensor at offsets read from two scalars (``codegen.plan``:
  two forms, so the grid is not split over cores on the strength of the first form alone).
"""

from __future__ import annotations

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu.codegen.plan import grid_split
from tpu_checks import run_checked

from tilecore import TilecoreError

M, N, BM = 8, 16, 4


def branch_offsets_kernel() -> Any:
    """Positive elements go to columns ``R0[b] % 2 * N + j``, the others (negated) to ``R1[b] % 2 * N + j``."""

    @T.prim_func
    def branch_offsets(
        X: T.Tensor((M, N), "float32"),
        R0: T.Tensor((M // BM,), "int32"),
        R1: T.Tensor((M // BM,), "int32"),
        Out: T.Tensor((M, 2 * N), "float32"),
    ):
        with T.Kernel(M // BM, threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            o = T.alloc_shared((BM, 2 * N), "float32")
            r0 = T.alloc_var("int32")
            r1 = T.alloc_var("int32")
            r0 = R0[bx]
            r1 = R1[bx]
            T.copy(X[bx * BM, 0], x)
            T.fill(o, 0)
            for i, j in T.Parallel(BM, N):
                if x[i, j] > 0:
                    o[i, j + r0 % 2 * N] = x[i, j]
                else:
                    o[i, j + r1 % 2 * N] = -x[i, j]
            T.copy(o, Out[bx * BM, 0])

    return branch_offsets


@pytest.mark.usefixtures("toolchain")
def test_if_else_stores_at_offsets_read_from_two_scalars() -> None:
    kernel = tilelang.compile(branch_offsets_kernel(), target="tpu")
    x = torch.randn(M, N)
    r0, r1 = torch.tensor([0, 5], dtype=torch.int32), torch.tensor([1, 2], dtype=torch.int32)  # block 0: 0 / N; block 1: N / 0
    out = torch.full((M, 2 * N), 7.0)
    run_checked(kernel, x, r0, r1, out, inputs=(0, 1, 2))
    expected = torch.zeros(M, 2 * N)
    for b in range(M // BM):
        rows = slice(b * BM, (b + 1) * BM)
        block = x[rows]
        then_at, else_at = int(r0[b]) % 2 * N, int(r1[b]) % 2 * N
        expected[rows, then_at : then_at + N] = torch.where(block > 0, block, expected[rows, then_at : then_at + N])
        expected[rows, else_at : else_at + N] = torch.where(block > 0, expected[rows, else_at : else_at + N], -block)
    assert torch.equal(out, expected)


def permuted_in_place_kernel() -> Any:
    @T.prim_func
    def permuted_in_place(
        X: T.Tensor((M, N), "float32"), P0: T.Tensor((N,), "int32"), P1: T.Tensor((N,), "int32"), Out: T.Tensor((M, N), "float32")
    ):
        with T.Kernel(1, threads=1):
            x = T.alloc_shared((M, N), "float32")
            p0 = T.alloc_shared((N,), "int32")
            p1 = T.alloc_shared((N,), "int32")
            T.copy(X, x)
            T.copy(P0, p0)
            T.copy(P1, p1)
            for i, j in T.Parallel(M, N):
                x[i, p0[j]] = x[i, p1[j]] + 1.0
            T.copy(x, Out)

    return permuted_in_place


def test_parallel_reading_what_another_iteration_writes_through_two_index_tiles_is_refused() -> None:
    """``x[i, p0[j]] = x[i, p1[j]] + 1``: iteration j reads the element another one writes (a
    race in T.Parallel); run in one order it gave that order's answer, silently."""
    with pytest.raises(TilecoreError) as info:
        tilelang.compile(permuted_in_place_kernel(), target="tpu")
    text = str(info.value)
    assert "tilelang-tpu" in text and "x[i, p0[j]]" in text


def atomic_offsets_kernel() -> Any:
    @T.prim_func
    def atomic_offsets(
        A: T.Tensor((128, 96), "float32"), Col0: T.Tensor((1,), "int32"), Col1: T.Tensor((1,), "int32"), C: T.Tensor((128, 192), "float32")
    ):
        with T.Kernel(2, 2, threads=1) as (bx, by):
            c = T.alloc_fragment((64, 48), "float32")
            c0 = T.alloc_var("int32")
            c1 = T.alloc_var("int32")
            c0 = Col0[0]
            c1 = Col1[0]
            T.copy(A[by * 64, bx * 48], c)
            T.atomic_add(C[by * 64, c0 % 2 * 96 + bx * 48], c)
            T.atomic_add(C[by * 64, c1 % 2 * 96 + bx * 48], c)

    return atomic_offsets


def test_two_atomic_add_forms_at_offsets_read_from_two_scalars_are_two_forms() -> None:
    """The grid split's check that one form of ``T.atomic_add`` writes each tensor (codegen.plan)."""
    from test_tpu_multicore import _device_module

    module, _ = _device_module(atomic_offsets_kernel())
    func = next(iter(module.functions.values()))
    split = grid_split(func.body, 8)
    assert split.loops == () and "two T.atomic_add forms write C" in split.reason, split
