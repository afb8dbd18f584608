"""Wrong results found by the device differential run (issue 18, seeds 4001 and 4018), shrunk,
on the BM1690 emulator against torch; inputs checked untouched.

* seed4001_n184: ``o[i, j] = T.cast(X[bx * BM + i, j], "float32")`` of a bf16 global in a
  ``T.Parallel``, then ``T.reduce_min``: row 64 of 65 came out wrong.  The 16-bit staging tile
  of the cast read was declared with its block's shape (64 columns), not the tile's (16).
* seed4018_n32: ``T.cast(bx * 64 + i, "int8") // 3`` at row 128 (-128 // 3) gave -42, not -43.
  TVM's bound analysis takes the int8 cast of 0..191 to be 0..127 (no wrap) and ``Simplify``
  rewrites the floor division as C's truncating one (TileLang's ``c`` target gives -42 too);
  the code generator sees only the truncation, so a truncating division or remainder of a
  narrowing cast that may wrap is now refused by name.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def cast_read_reduce(M: int, N: int, BM: int, dtype: str, kind: str) -> Any:
    reduce = T.reduce_min if kind == "min" else T.reduce_max

    @T.prim_func
    def cast_read(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32"), Rows: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            o = T.alloc_fragment((BM, N), "float32")
            for i, j in T.Parallel(BM, N):
                o[i, j] = T.cast(T.if_then_else(bx * BM + i < M, X[bx * BM + i, j], T.cast(0, dtype)), "float32")
            r = T.alloc_fragment((BM,), "float32")
            T.copy(o, Rows[bx * BM, 0])
            reduce(o, r, dim=1)
            T.copy(r, Out[bx * BM])

    return cast_read


@pytest.mark.parametrize("kind", ["min", "max"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("BM", [1, 63, 64, 65, 128])
def test_found_16bit_cast_read_then_reduce(BM: int, dtype: str, kind: str) -> None:
    M, N = BM, 16
    kernel = tilelang.compile(cast_read_reduce(M, N, BM, dtype, kind), target="tpu")
    x = (torch.randn(M, N) * 4).to(getattr(torch, dtype))
    out, rows = torch.zeros(M), torch.zeros(M, N)
    run_checked(kernel, x, out, rows, inputs=(0,))
    torch.testing.assert_close(rows, x.float(), rtol=0, atol=0)
    expected = x.float().amin(dim=1) if kind == "min" else x.float().amax(dim=1)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def int8_division(M: int, BM: int, remainder: bool) -> Any:
    @T.prim_func
    def narrow_div(X: T.Tensor((M, 4), "int32"), Out: T.Tensor((M, 4), "int32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_fragment((BM, 4), "int32")
            o = T.alloc_fragment((BM, 4), "int32")
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, 4):
                if remainder:
                    o[i, j] = T.cast(T.cast(bx * BM + i, "int8") % T.cast(3, "int8"), "int32") + x[i, j]
                else:
                    o[i, j] = T.cast(T.cast(bx * BM + i, "int8") // T.cast(3, "int8"), "int32") + x[i, j]
            T.copy(o, Out[bx * BM, 0])

    return narrow_div


@pytest.mark.parametrize("remainder", [False, True])
def test_found_int8_floor_division_of_a_wrapping_cast_is_refused(remainder: bool) -> None:
    # Rows 128..191 cast to int8 wrap to -128..-65, where floor and truncation differ.
    with pytest.raises(ValueError, match=r"T\.Cast\(\"int8\", bx \* 64 \+ i\), which may wrap[\s\S]*fix: divide the value in int32"):
        tilelang.compile(int8_division(192, 64, remainder), target="tpu")


@pytest.mark.parametrize("remainder", [False, True])
@pytest.mark.parametrize(("M", "BM"), [(1, 1), (63, 63), (64, 64), (65, 65), (128, 64)])
def test_found_int8_floor_division_of_a_cast_that_cannot_wrap(M: int, BM: int, remainder: bool) -> None:
    kernel = tilelang.compile(int8_division(M, BM, remainder), target="tpu")
    x = torch.randint(-1000, 1000, (M, 4), dtype=torch.int32)
    out = torch.zeros(M, 4, dtype=torch.int32)
    run_checked(kernel, x, out, inputs=(0,))
    rows = torch.arange(M, dtype=torch.int64).to(torch.int8).to(torch.int64)[:, None]
    part = rows % 3 if remainder else torch.div(rows, 3, rounding_mode="floor")
    torch.testing.assert_close(out.long(), part + x.long(), rtol=0, atol=0)


def serial_int8_division(M: int) -> Any:
    @T.prim_func
    def serial_div(Out: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, 64), threads=1) as bx:
            o = T.alloc_fragment((64,), "int32")
            for i in T.serial(64):
                o[i] = T.cast(T.cast(bx * 64 + i, "int8") // T.cast(3, "int8"), "int32")
            T.copy(o, Out[bx * 64])

    return serial_div


@pytest.mark.parametrize("M", [128, 192])
def test_found_int8_floor_division_in_scalar_code(M: int) -> None:
    """The same division in T.serial (scalar C): refused where the cast may wrap, floor otherwise."""
    if M > 128:
        with pytest.raises(ValueError, match=r"narrowing cast that may wrap"):
            tilelang.compile(serial_int8_division(M), target="tpu")
        return
    kernel = tilelang.compile(serial_int8_division(M), target="tpu")
    out = torch.zeros(M, dtype=torch.int32)
    kernel(out)
    rows = torch.arange(M).to(torch.int8).to(torch.int64)
    torch.testing.assert_close(out.long(), torch.div(rows, 3, rounding_mode="floor"), rtol=0, atol=0)
