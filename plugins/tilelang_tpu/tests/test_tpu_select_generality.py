"""``T.if_then_else`` in a ``T.Parallel`` body that the differential run (c vs tpu vs torch, seeds
7001-7030) found refused by the tpu target while ``c`` ran it right (issue 18):

* selects between int8 / uint8 / int16 / uint16 values (widened to int32, selected, narrowed back);
* conditions that are a constant bool once ``&``, ``|``, ``~`` of conditions are read as logical
  (``x | False``, ``x & True``, ``True``, ``False``, nested): the branch is chosen at compile time.

Found programs as found, plus user-style kernels over 133 rows with tiles of 1, 63, 64, 65 and 128
rows (shapes that do not divide), unused and unsorted parameters, random data, inputs checked
untouched, compared with torch exactly.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

NARROW = {"int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "uint16": torch.uint16}
RANGES = {"int8": (-128, 128), "uint8": (0, 256), "int16": (-32768, 32768), "uint16": (0, 65536)}
TILES = [1, 63, 64, 65, 128]


def _random(dtype: str, shape: tuple[int, ...]) -> torch.Tensor:
    low, high = RANGES[dtype]
    return torch.randint(low, high, shape, dtype=torch.int32).to(NARROW[dtype])


def found_int8_select_kernel() -> Any:
    """Seeds 7001-7030, "T.if_then_else of intN values in a T.Parallel body" (as found)."""

    @T.prim_func
    def diff_kernel(
        X0: T.Tensor((133, 7), "int8"), Out: T.Tensor((133, 7), "int32"), Unused: T.Tensor((133, 7), "float32"), X1: T.Tensor((7,), "int32")
    ):
        with T.Kernel(T.ceildiv(133, 64), threads=1) as bx:
            x1_t = T.alloc_fragment((7,), "int32")
            T.copy(X1, x1_t)
            for i, j in T.Parallel(64, 7):
                if bx * 64 + i < 133:
                    Out[bx * 64 + i, j] = T.cast(
                        T.if_then_else(
                            ((T.float16(1.0) >= T.float16(2.0)) & (T.cast(i, "float16") == T.cast(i, "float16"))),
                            (
                                T.cast(i, "int8")
                                | T.if_then_else(
                                    (T.cast(x1_t[j], "float16") <= T.cast(j, "float16")),
                                    T.if_then_else(bx * 64 + i < 133, X0[bx * 64 + i, j], T.cast(0, "int8")),
                                    T.cast((bx * 64 + i), "int8"),
                                )
                            ),
                            T.cast(1, "int8"),
                        ),
                        "int32",
                    )

    return diff_kernel


def test_found_int8_select_under_constant_condition() -> None:
    kernel = tilelang.compile(found_int8_select_kernel(), target="tpu")
    x0 = _random("int8", (133, 7))
    x1 = torch.randint(-10, 10, (7,), dtype=torch.int32)
    out = torch.full((133, 7), -99, dtype=torch.int32)
    unused = torch.randn(133, 7)
    run_checked(kernel, x0, out, unused, x1, inputs=(0, 2, 3))
    assert torch.equal(out, torch.ones(133, 7, dtype=torch.int32))  # 1.0 >= 2.0 is false: the else value


def narrow_select_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """A user's select of narrow integers: the larger of two tiles where X wins, else the row index
    wrapped into ``dtype`` (C's conversion), and a float condition picking X or Y."""

    @T.prim_func
    def narrow_select(
        Unused: T.Tensor((M, N), "float32"),
        Y: T.Tensor((M, N), dtype),
        Out: T.Tensor((M, N), dtype),
        X: T.Tensor((M, N), dtype),
        Out2: T.Tensor((M, N), dtype),
        S: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_fragment((BM, N), dtype)
            T.copy(X[bx * BM, 0], x_t)
            y_t = T.alloc_shared((BM, N), dtype)
            T.copy(Y[bx * BM, 0], y_t)
            s_t = T.alloc_fragment((BM, N), "float32")
            T.copy(S[bx * BM, 0], s_t)
            o_t = T.alloc_fragment((BM, N), dtype)
            o2_t = T.alloc_fragment((BM, N), dtype)
            for i, j in T.Parallel(BM, N):
                o_t[i, j] = T.if_then_else(x_t[i, j] > y_t[i, j], x_t[i, j], T.cast(bx * BM + i, dtype))
                o2_t[i, j] = T.if_then_else(s_t[i, j] > T.float32(0.0), x_t[i, j], y_t[i, j])
            T.copy(o_t, Out[bx * BM, 0])
            T.copy(o2_t, Out2[bx * BM, 0])

    return narrow_select


@pytest.mark.parametrize("dtype", list(NARROW))
@pytest.mark.parametrize("BM", TILES)
def test_select_of_narrow_integers(BM: int, dtype: str) -> None:
    M, N = 133, 40
    kernel = tilelang.compile(narrow_select_kernel(M, N, BM, dtype), target="tpu")
    x, y = _random(dtype, (M, N)), _random(dtype, (M, N))
    s = torch.randn(M, N)
    out, out2 = torch.zeros(M, N, dtype=NARROW[dtype]), torch.zeros(M, N, dtype=NARROW[dtype])
    unused = torch.randn(M, N)
    run_checked(kernel, unused, y, out, x, out2, s, inputs=(0, 1, 3, 5))
    xi, yi = x.to(torch.int32), y.to(torch.int32)
    rows = torch.arange(M, dtype=torch.int32)[:, None].expand(M, N)
    wrapped_rows = rows.to(torch.int64).to(NARROW[dtype]).to(torch.int32)
    torch.testing.assert_close(out.to(torch.int32), torch.where(xi > yi, xi, wrapped_rows), rtol=0, atol=0)
    torch.testing.assert_close(out2.to(torch.int32), torch.where(s > 0, xi, yi), rtol=0, atol=0)


def found_false_or_kernel() -> Any:
    """Seeds 7001-7030, "T.if_then_else condition T.bool(False) in a T.Parallel body" (as found):
    ``bx * 65 + i == -3`` is false, so the condition is ``x0 != x1 | False``."""

    @T.prim_func
    def diff_kernel(
        X1: T.Tensor((135, 40), "float16"),
        Unused: T.Tensor((135, 40), "float32"),
        Out: T.Tensor((135, 40), "float16"),
        X0: T.Tensor((135, 40), "float16"),
    ):
        with T.Kernel(T.ceildiv(135, 65), threads=1) as bx:
            x0_t = T.alloc_fragment((65, 40), "float16")
            T.copy(X0[bx * 65, 0], x0_t)
            x1_t = T.alloc_shared((65, 40), "float16")
            T.copy(X1[bx * 65, 0], x1_t)
            o_t = T.alloc_fragment((65, 40), "float16")
            for i, j in T.Parallel(65, 40):
                o_t[i, j] = T.if_then_else(
                    ((T.cast(x0_t[i, j], "int32") != T.cast(x1_t[i, j], "int32")) | ((bx * 65 + i) == -3)), T.cast(i, "float16"), x0_t[i, j]
                )
            T.copy(o_t, Out[bx * 65, 0])

    return diff_kernel


def test_found_condition_or_false() -> None:
    kernel = tilelang.compile(found_false_or_kernel(), target="tpu")
    x1 = (torch.randn(135, 40) * 3).to(torch.float16)
    x0 = torch.where(torch.rand(135, 40) < 0.5, x1, (torch.randn(135, 40) * 3).to(torch.float16))
    out = torch.zeros(135, 40, dtype=torch.float16)
    unused = torch.randn(135, 40)
    run_checked(kernel, x1, unused, out, x0, inputs=(0, 1, 3))
    rows = (torch.arange(135) % 65)[:, None].expand(135, 40).to(torch.float16)
    expected = torch.where(x0.to(torch.int32) != x1.to(torch.int32), rows, x0)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def found_false_kernel() -> Any:
    """Seeds 7001-7030 (as found): ``0.25 > 1.0 | 0.25 > 1.0`` is false."""

    @T.prim_func
    def diff_kernel(Unused: T.Tensor((65, 40), "float32"), X0: T.Tensor((65, 40), "int32"), Out: T.Tensor((65, 40), "int32")):
        with T.Kernel(T.ceildiv(65, 64), threads=1) as bx:
            x0_t = T.alloc_fragment((64, 40), "int32")
            T.copy(X0[bx * 64, 0], x0_t)
            o_t = T.alloc_fragment((64, 40), "int32")
            for i, j in T.Parallel(64, 40):
                o_t[i, j] = -T.if_then_else(
                    ((T.float16(0.25) > T.float16(1.0)) | (T.float16(0.25) > T.float16(1.0))), (1 | x0_t[i, j]), (-i)
                )
            T.copy(o_t, Out[bx * 64, 0])

    return diff_kernel


def test_found_condition_false() -> None:
    kernel = tilelang.compile(found_false_kernel(), target="tpu")
    x0 = torch.randint(-1000, 1000, (65, 40), dtype=torch.int32)
    out = torch.full((65, 40), -99, dtype=torch.int32)
    unused = torch.randn(65, 40)
    run_checked(kernel, unused, x0, out, inputs=(0, 1))
    expected = (torch.arange(65, dtype=torch.int32) % 64)[:, None].expand(65, 40)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


#: name -> (the condition, given the tiles' comparison ``x > y``; its torch value).
CONDITIONS: dict[str, tuple[Any, Any]] = {
    "or_false": (lambda c: c | T.bool(False), lambda c: c),
    "and_true": (lambda c: T.bool(True) & c, lambda c: c),
    "true": (lambda c: T.bool(True) | T.bool(True), lambda c: torch.ones_like(c)),  # as found, seed 7001-7030
    "false": (lambda c: T.bool(False) & T.bool(True), lambda c: torch.zeros_like(c)),
    "or_true": (lambda c: c | T.bool(True), lambda c: torch.ones_like(c)),
    "and_false": (lambda c: c & T.bool(False), lambda c: torch.zeros_like(c)),
    "nested": (lambda c: ~(T.bool(False) | (c & ~T.bool(False))), lambda c: ~c),
    "nested_constant": (lambda c: ~(T.bool(False) | (T.bool(True) & T.bool(False))), lambda c: torch.ones_like(c)),
}


def constant_condition_kernel(M: int, N: int, BM: int, condition: Any) -> Any:
    """A user's kernel whose condition carries compile-time flags (``x > y | use_all``)."""

    @T.prim_func
    def constant_condition(
        Y: T.Tensor((M, N), "float32"),
        Unused: T.Tensor((M, N), "float32"),
        Out: T.Tensor((M, N), "float32"),
        X: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x_t)
            y_t = T.alloc_shared((BM, N), "float32")
            T.copy(Y[bx * BM, 0], y_t)
            o_t = T.alloc_fragment((BM, N), "float32")
            for i, j in T.Parallel(BM, N):
                o_t[i, j] = T.if_then_else(condition(x_t[i, j] > y_t[i, j]), x_t[i, j] * T.float32(2.0), y_t[i, j] - x_t[i, j])
            T.copy(o_t, Out[bx * BM, 0])

    return constant_condition


@pytest.mark.parametrize("name", list(CONDITIONS))
@pytest.mark.parametrize("BM", TILES)
def test_constant_conditions(BM: int, name: str) -> None:
    M, N = 133, 40
    condition, reference = CONDITIONS[name]
    kernel = tilelang.compile(constant_condition_kernel(M, N, BM, condition), target="tpu")
    x, y = torch.randn(M, N), torch.randn(M, N)
    out = torch.zeros(M, N)
    unused = torch.randn(M, N)
    run_checked(kernel, y, unused, out, x, inputs=(0, 1, 3))
    torch.testing.assert_close(out, torch.where(reference(x > y), x * 2, y - x), rtol=0, atol=0)


def guarded_narrow_select_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """A user's guarded store of a narrow select straight into a global tensor (the row guard of
    a tile that overhangs the tensor), reading the global input inside the T.Parallel."""

    @T.prim_func
    def guarded_narrow_select(Out: T.Tensor((M, N), dtype), Unused: T.Tensor((M, N), "float32"), X: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            for i, j in T.Parallel(BM, N):
                if bx * BM + i < M:
                    Out[bx * BM + i, j] = T.if_then_else(X[bx * BM + i, j] < T.cast(j, dtype), X[bx * BM + i, j], T.cast(j, dtype))

    return guarded_narrow_select


@pytest.mark.parametrize("dtype", ["int8", "uint16"])
@pytest.mark.parametrize("BM", TILES)
def test_guarded_global_store_of_narrow_select(BM: int, dtype: str) -> None:
    M, N = 133, 40
    kernel = tilelang.compile(guarded_narrow_select_kernel(M, N, BM, dtype), target="tpu")
    x = _random(dtype, (M, N))
    out = torch.zeros(M, N, dtype=NARROW[dtype])
    unused = torch.randn(M, N)
    run_checked(kernel, out, unused, x, inputs=(1, 2))
    xi = x.to(torch.int32)
    cols = torch.arange(N, dtype=torch.int32)[None, :].expand(M, N)
    torch.testing.assert_close(out.to(torch.int32), torch.where(xi < cols, xi, cols), rtol=0, atol=0)
