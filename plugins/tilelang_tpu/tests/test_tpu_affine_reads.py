"""Tile reads in ``T.Parallel`` that the differential run (c vs tpu vs torch, 12,041 programs on
the device) found refused by the tpu target while ``c`` ran them right (issue 18), now lowered by
``codegen.emit.affine_reads``:

* transposed reads ``x[j, i]`` (and ``x[j + 1, i]``) of a tile in an ``(i, j)`` loop;
* reversed reads ``x[i, N - 1 - j]`` and ``x[BM - 1 - i, j]``;
* reads that leave a loop variable out: one row ``x[k, j]`` and one element ``x[k]`` in an
  ``(i, j)`` loop, and a column ``x[i, k]``, a row ``x[k, i]``, an element ``x[k]`` and a 1-D tile
  ``x[i]`` in a loop whose second extent is 1 (tilelang drops it: ``T.Parallel(BM, 1)``);
* a global read in such a loop, staged into a 1-D tile (``X0_staged[i]``, and ``X0_staged[j]`` in a
  ``T.Parallel(1, N)``, as found).

User-style kernels over 133 rows with tiles of 1, 63, 64, 65 and 128 rows (shapes that do not
divide), unused and unsorted parameters, every dtype the body allows, random data, inputs checked
untouched, compared with torch exactly.  Each test also checks that the body has its vector form
(before, such a body ran per element, or was refused where the scalar unit has no form either).
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import run_checked

pytestmark = pytest.mark.usefixtures("toolchain")

#: (tile rows, dtype): every tile height and every dtype, without the whole cross product.
CASES = [(1, "float32"), (63, "float16"), (64, "bfloat16"), (65, "int8"), (128, "int32"), (65, "float32"), (64, "int8")]
TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32, "int8": torch.int8}
M = 133


def _compile(func: Any) -> Any:
    """The kernel for tpu, checked to compute its reads with tile operations: before, these reads
    had no vector form, and the body ran per element (or was refused where the scalar unit has no
    form for it either: exp, fp16/bf16/int8 elements in some places)."""
    kernel = tilelang.compile(func, target="tpu")
    assert "per-element T.Parallel" not in kernel.get_kernel_source()
    return kernel


def _random(dtype: str, shape: tuple[int, ...]) -> torch.Tensor:
    if dtype == "int8":
        return torch.randint(-128, 128, shape, dtype=torch.int32).to(torch.int8)
    if dtype == "int32":
        return torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int64).to(torch.int32)
    return (torch.randn(shape) * 4).to(TORCH[dtype])


def transposed_kernel(N: int, BM: int, dtype: str) -> Any:
    """``o[i, j] = x[j, i] + y[j + 1, i]`` computed in int32 (integers) or in ``dtype`` (floats)."""
    acc = "int32" if "int" in dtype else dtype

    @T.prim_func
    def transposed(
        Y: T.Tensor((N + 1, M), dtype), Unused: T.Tensor((4,), "float32"), Out: T.Tensor((M, N), acc), X: T.Tensor((N, M), dtype)
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_shared((N, BM), dtype)
            T.copy(X[0, bx * BM], x_t)
            y_t = T.alloc_fragment((N + 1, BM), dtype)
            T.copy(Y[0, bx * BM], y_t)
            o_t = T.alloc_fragment((BM, N), acc)
            for i, j in T.Parallel(BM, N):
                o_t[i, j] = T.cast(x_t[j, i], acc) + T.cast(y_t[j + 1, i], acc)
            T.copy(o_t, Out[bx * BM, 0])

    return transposed


@pytest.mark.parametrize(("BM", "dtype"), CASES)
def test_transposed_read(BM: int, dtype: str) -> None:
    N = 7 if BM in (1, 128) else 40
    kernel = _compile(transposed_kernel(N, BM, dtype))
    x, y = _random(dtype, (N, M)), _random(dtype, (N + 1, M))
    acc = torch.int32 if "int" in dtype else TORCH[dtype]
    out = torch.zeros(M, N, dtype=acc)
    unused = torch.randn(4)
    run_checked(kernel, y, unused, out, x, inputs=(0, 1, 3))
    # int32 wraps (the low 32 bits kept); floats round once in dtype, as the tile add does.
    expected = (x.T.to(torch.int64) + y[1:].T.to(torch.int64)).to(torch.int32) if "int" in dtype else x.T + y[1:].T
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def reversed_kernel(N: int, BM: int, dtype: str) -> Any:
    """``o[i, j] = x[i, N - 1 - j] * 2 - x[BM - 1 - i, j]`` (each row block reversed along both axes)."""
    acc = "int32" if "int" in dtype else dtype

    @T.prim_func
    def reversed_reads(X: T.Tensor((M, N), dtype), Out: T.Tensor((M, N), acc), Unused: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_fragment((BM, N), dtype)
            T.copy(X[bx * BM, 0], x_t)
            o_t = T.alloc_fragment((BM, N), acc)
            for i, j in T.Parallel(BM, N):
                o_t[i, j] = T.cast(x_t[i, N - 1 - j], acc) * T.cast(2, acc) - T.cast(x_t[BM - 1 - i, j], acc)
            T.copy(o_t, Out[bx * BM, 0])

    return reversed_reads


@pytest.mark.parametrize(("BM", "dtype"), CASES)
def test_reversed_read(BM: int, dtype: str) -> None:
    N = 7 if BM in (1, 128) else 65
    kernel = _compile(reversed_kernel(N, BM, dtype))
    x = _random(dtype, (M, N))
    if dtype != "int32" and dtype != "int8":
        x = x.round()  # small integers: * 2 and - are exact in every float dtype, whatever the order
    acc = torch.int32 if "int" in dtype else TORCH[dtype]
    out = torch.zeros(M, N, dtype=acc)
    run_checked(kernel, x, out, torch.randn(M, N), inputs=(0, 2))
    # The block's rows as the kernel sees them: rows past M read the zeros T.copy fills in.
    padded = torch.zeros(-(-M // BM) * BM, N, dtype=x.dtype)
    padded[:M] = x
    flipped_rows = padded.view(-1, BM, N).flip(1).reshape(-1, N)[:M]
    if "int" in dtype:
        expected = (x.flip(1).to(torch.int64) * 2 - flipped_rows.to(torch.int64)).to(torch.int32)
    else:
        expected = x.flip(1) * 2 - flipped_rows
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def left_out_kernel(N: int, BM: int, dtype: str) -> Any:
    """``o[i, j] = x[i, j] + x[2, j] * r[3]``: one row and one element read on every row."""

    @T.prim_func
    def left_out(R: T.Tensor((5,), dtype), Out: T.Tensor((M, N), dtype), X: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_fragment((BM + 3, N), dtype)
            T.copy(X[bx * BM, 0], x_t)
            r_t = T.alloc_fragment((5,), dtype)
            T.copy(R, r_t)
            o_t = T.alloc_fragment((BM, N), dtype)
            for i, j in T.Parallel(BM, N):
                o_t[i, j] = x_t[i, j] + x_t[2, j] * r_t[3]
            T.copy(o_t, Out[bx * BM, 0])

    return left_out


@pytest.mark.parametrize(("BM", "dtype"), [c for c in CASES if c[1] != "int8"])
def test_row_and_element_read_on_every_row(BM: int, dtype: str) -> None:
    N = 40
    kernel = _compile(left_out_kernel(N, BM, dtype))
    x = _random(dtype, (M, N)) if dtype == "int32" else _random(dtype, (M, N)).round()
    r = torch.tensor([0, 0, 0, 3, 0]).to(TORCH[dtype])
    out = torch.zeros(M, N, dtype=TORCH[dtype])
    run_checked(kernel, r, out, x, inputs=(0, 2))
    padded = torch.zeros(-(-M // BM) * BM + 3, N, dtype=x.dtype)
    padded[:M] = x
    row = torch.stack([padded[b * BM + 2] for b in range(-(-M // BM))]).repeat_interleave(BM, 0)[:M]
    expected = (x.to(torch.int64) + row.to(torch.int64) * 3).to(torch.int32) if dtype == "int32" else x + row * 3
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def one_column_kernel(BM: int, dtype: str) -> Any:
    """``T.Parallel(BM, 1)``: a column ``x[i, 3]``, a row ``w[0, i]``, an element ``r[1]`` and a 1-D tile ``v[i]``."""

    @T.prim_func
    def one_column(
        W: T.Tensor((1, M), dtype),
        X: T.Tensor((M, 5), dtype),
        Out: T.Tensor((M, 1), "float32"),
        R: T.Tensor((2,), dtype),
        V: T.Tensor((M,), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x_t = T.alloc_fragment((BM, 5), dtype)
            T.copy(X[bx * BM, 0], x_t)
            w_t = T.alloc_shared((1, BM), dtype)
            T.copy(W[0, bx * BM], w_t)
            r_t = T.alloc_fragment((2,), dtype)
            T.copy(R, r_t)
            v_t = T.alloc_fragment((BM,), dtype)
            T.copy(V[bx * BM], v_t)
            o_t = T.alloc_fragment((BM, 1), "float32")
            for i, j in T.Parallel(BM, 1):
                o_t[i, j] = (
                    T.cast(x_t[i, 3], "float32") * T.float32(1000.0)
                    + T.cast(w_t[j, i], "float32") * T.float32(10.0)
                    + T.cast(r_t[1], "float32") * T.float32(0.5)
                    - T.cast(v_t[i], "float32")
                )
            T.copy(o_t, Out[bx * BM, 0])

    return one_column


@pytest.mark.parametrize(("BM", "dtype"), CASES)
def test_reads_in_a_loop_of_one_column(BM: int, dtype: str) -> None:
    kernel = _compile(one_column_kernel(BM, dtype))
    small = {"int32": (-50, 50), "int8": (-50, 50)}
    if dtype in small:
        gen = lambda shape: torch.randint(*small[dtype], shape, dtype=torch.int32).to(TORCH[dtype])  # noqa: E731
    else:
        gen = lambda shape: torch.randint(-50, 50, shape).to(TORCH[dtype])  # noqa: E731  (exact in every dtype)
    w, x, r, v = gen((1, M)), gen((M, 5)), gen((2,)), gen((M,))
    out = torch.zeros(M, 1)
    run_checked(kernel, w, x, out, r, v, inputs=(0, 1, 3, 4))
    f = lambda t: t.to(torch.float32)  # noqa: E731
    expected = f(x[:, 3]) * 1000 + f(w[0]) * 10 + f(r[1]) * 0.5 - f(v)
    torch.testing.assert_close(out[:, 0], expected, rtol=0, atol=0)


def found_staged_kernel() -> Any:
    """Device differential run, "tile read XN_staged[i] in a T.Parallel over (i)" (as found)."""

    @T.prim_func
    def diff_kernel(Out: T.Tensor((64, 1), "float32"), X0: T.Tensor((64, 1), "int8"), Unused: T.Tensor((64, 1), "float32")):
        with T.Kernel(T.ceildiv(64, 63), threads=1) as bx:
            o_t = T.alloc_fragment((63, 1), "float32")
            for i, j in T.Parallel(63, 1):
                o_t[i, j] = T.cast(T.if_then_else(bx * 63 + i < 64, X0[bx * 63 + i, j], T.cast(0, "int8")), "float32")
            T.copy(o_t, Out[bx * 63, 0])

    return diff_kernel


def test_found_staged_read_in_a_loop_of_one_column() -> None:
    kernel = _compile(found_staged_kernel())
    x0 = _random("int8", (64, 1))
    out = torch.full((64, 1), -99.0)
    run_checked(kernel, out, x0, torch.randn(64, 1), inputs=(1, 2))
    torch.testing.assert_close(out, x0.to(torch.float32), rtol=0, atol=0)


def found_transposed_kernel() -> Any:
    """Device differential run, "tile read BUF[j, i] in a T.Parallel over (i, j)" (as found, less an
    int8 cast of the row index in the else value, a separate refusal)."""

    @T.prim_func
    def diff_kernel(
        X0: T.Tensor((63, 16), "float16"),
        Unused: T.Tensor((63, 16), "float32"),
        Out: T.Tensor((63, 16), "int32"),
        X1: T.Tensor((16, 63), "float16"),
    ):
        with T.Kernel(T.ceildiv(63, 63), threads=1) as bx:
            x1_t = T.alloc_fragment((16, 63), "float16")
            T.copy(X1[0, bx * 63], x1_t)
            o_t = T.alloc_fragment((63, 16), "int32")
            for i, j in T.Parallel(63, 16):
                o_t[i, j] = T.if_then_else(
                    (
                        (T.float32(2.0) >= T.cast(x1_t[j, i], "float32"))
                        and (x1_t[j, i] < T.if_then_else(bx * 63 + i < 63, X0[bx * 63 + i, j], T.float16(0.0)))
                    ),
                    T.cast(x1_t[j, i], "int32"),
                    bx * 63 + i,
                )
            T.copy(o_t, Out[bx * 63, 0])

    return diff_kernel


def test_found_transposed_read() -> None:
    kernel = _compile(found_transposed_kernel())
    x0, x1 = (torch.randn(63, 16) * 3).to(torch.float16), (torch.randn(16, 63) * 3).to(torch.float16)
    out = torch.full((63, 16), -99, dtype=torch.int32)
    run_checked(kernel, x0, torch.randn(63, 16), out, x1, inputs=(0, 1, 3))
    xt = x1.T
    rows = torch.arange(63, dtype=torch.int32)[:, None].expand(63, 16)
    expected = torch.where((xt.float() <= 2.0) & (xt < x0), xt.to(torch.int32), rows)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def found_staged_row_kernel() -> Any:
    """Device differential run, "tile read XN_staged[j] in a T.Parallel over (j)" (as found, less a
    ``T.exp`` of a constant in the else value, a separate refusal): one row per block, the global
    read staged into a 1-D tile on the lanes and read along ``W``."""

    @T.prim_func
    def diff_kernel(X0: T.Tensor((3, 65), "float16"), Unused: T.Tensor((3, 65), "float32"), Out: T.Tensor((3, 65), "float32")):
        with T.Kernel(T.ceildiv(3, 1), threads=1) as bx:
            o_t = T.alloc_fragment((1, 65), "float32")
            for i, j in T.Parallel(1, 65):
                o_t[i, j] = T.if_then_else(
                    (
                        (T.float16(0.25) <= T.cast((bx * 1 + i), "float16"))
                        | (T.if_then_else(bx * 1 + i < 3, X0[bx * 1 + i, j], T.float16(0.0)) > T.float16(0.0))
                    ),
                    T.max(T.cast(j, "float32"), T.cast(T.if_then_else(bx * 1 + i < 3, X0[bx * 1 + i, j], T.float16(0.0)), "float32")),
                    T.float32(7.5),
                )
            T.copy(o_t, Out[bx * 1, 0])

    return diff_kernel


def test_found_staged_read_along_a_row() -> None:
    kernel = _compile(found_staged_row_kernel())
    x0 = (torch.randn(3, 65) * 40).to(torch.float16)
    out = torch.full((3, 65), -99.0)
    run_checked(kernel, x0, torch.randn(3, 65), out, inputs=(0, 1))
    rows = torch.arange(3, dtype=torch.float32)[:, None]
    cols = torch.arange(65, dtype=torch.float32)[None, :].expand(3, 65)
    x = x0.to(torch.float32)
    expected = torch.where((rows >= 0.25) | (x > 0), torch.maximum(cols, x), torch.tensor(7.5))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
