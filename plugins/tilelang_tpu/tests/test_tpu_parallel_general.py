"""General ``T.Parallel`` bodies on the BM1690 emulator against torch (issue 18, items 1, 2,
3, 5): int32 arithmetic with C's wrap-around, bit operations, shifts, floor and truncating
division by constants, loop indices used as values, casts between integers and floats
(in ``T.Parallel`` and in a casting ``T.copy``, upstream's w8a16 dequantisation), offset
and row-shifted reads (RoPE's rotate-half), serial-indexed rows under ``T.vectorized``,
``&``/``|`` in ``T.if_then_else`` conditions, ``T.clamp``, ``T.erf``, ``T.sin``, ``T.cos``.

Kernels are written the way tile-ai/tilelang's examples write them, over tiles of 1, 63,
64, 65 and 128 rows and shapes they do not divide, on random data; every run checks that
the inputs are left untouched.  Integer results are compared exactly.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch

pytestmark = pytest.mark.usefixtures("toolchain")

FLOATS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _run(kernel: Any, *tensors: torch.Tensor, inputs: tuple[int, ...]) -> None:
    """Run ``kernel`` on ``tensors`` and check that those at positions ``inputs`` stay untouched."""
    before = {k: tensors[k].clone() for k in inputs}
    kernel(*tensors)
    for k, original in before.items():
        torch.testing.assert_close(tensors[k], original, rtol=0, atol=0, equal_nan=True, msg="the kernel wrote one of its inputs")


def _wrap32(x: torch.Tensor) -> torch.Tensor:
    """int64 values wrapped to int32 as C's int32 arithmetic does."""
    return ((x + 2**31) % 2**32) - 2**31


def _int32_data(M: int, N: int) -> torch.Tensor:
    a = torch.randint(-(2**31), 2**31 - 1, (M, N), dtype=torch.int32)
    edges = torch.tensor([0, 1, -1, 2**31 - 1, -(2**31), 5, -5, 7, -7, 123456789], dtype=torch.int32)
    a.view(-1)[: edges.numel()] = edges[: a.numel()]
    return a


def int_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def int_ops(
        A: T.Tensor((M, N), "int32"),
        unused: T.Tensor((4,), "float32"),
        B: T.Tensor((M, N), "int32"),
        C: T.Tensor((M, N), "int32"),
        D: T.Tensor((M, N), "int32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            a = T.alloc_shared((BM, N), "int32")
            b = T.alloc_fragment((BM, N), "int32")
            c = T.alloc_fragment((BM, N), "int32")
            d = T.alloc_fragment((BM, N), "int32")
            T.copy(A[bx * BM, 0], a)
            for i, j in T.Parallel(BM, N):
                b[i, j] = ((a[i, j] * 3 + 7) // 4) ^ (a[i, j] >> 2) | (a[i, j] % 8) & j
                c[i, j] = a[i, j] // 3 + a[i, j] % 5 - T.truncdiv(a[i, j], 7) * 10 + T.truncmod(a[i, j], 7)
                d[i, j] = (a[i, j] << 3) + T.min(a[i, j], j) - T.max(a[i, j], bx * BM + i) + (a[i, j] << (j % 4))
            T.copy(b, B[bx * BM, 0])
            T.copy(c, C[bx * BM, 0])
            T.copy(d, D[bx * BM, 0])

    return int_ops


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 48, 64), (65, 20, 63), (3, 33, 1), (200, 16, 128), (65, 40, 65)])
def test_int32_arithmetic_bits_shifts_and_division_wrap_like_c(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(int_kernel(M, N, BM), target="tpu")
    a = _int32_data(M, N)
    unused = torch.randn(4)
    B, C, D = (torch.zeros(M, N, dtype=torch.int32) for _ in range(3))
    _run(kernel, a, unused, B, C, D, inputs=(0, 1))
    x = a.long()
    j = torch.arange(N)[None, :]
    row = torch.arange(M)[:, None]
    expected_b = _wrap32(_wrap32(x * 3 + 7) // 4) ^ (x >> 2) | ((x % 8) & j)
    trunc = torch.div(x, 7, rounding_mode="trunc")
    expected_c = _wrap32(x // 3 + x % 5 - trunc * 10 + torch.fmod(x, 7))
    expected_d = _wrap32(_wrap32(x << 3) + torch.minimum(x, j) - torch.maximum(x, row) + _wrap32(x << (j % 4)))
    assert torch.equal(B.long(), expected_b)
    assert torch.equal(C.long(), expected_c)
    assert torch.equal(D.long(), expected_d)


def dequant_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    @T.prim_func
    def dequant(
        Q: T.Tensor((M, N), "int8"),
        W: T.Tensor((M, N), dtype),
        S: T.Tensor((M,), dtype),
        H: T.Tensor((M, N), dtype),
        J: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            q = T.alloc_shared((BM, N), "int8")
            s = T.alloc_shared((BM,), dtype)
            w = T.alloc_fragment((BM, N), dtype)
            h = T.alloc_shared((BM, N), dtype)
            jf = T.alloc_fragment((BM, N), "float32")
            T.copy(Q[bx * BM, 0], q)
            T.copy(S[bx * BM], s)
            T.copy(Q[bx * BM, 0], h)  # a casting copy, int8 -> dtype
            for i, j in T.Parallel(BM, N):
                w[i, j] = T.cast(q[i, j], dtype) * s[i]
                jf[i, j] = T.cast(j, "float32") + T.cast(bx * BM + i, "float32") * 0.5
            T.copy(w, W[bx * BM, 0])
            T.copy(h, H[bx * BM, 0])
            T.copy(jf, J[bx * BM, 0])

    return dequant


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(130, 40, 64, "float16"), (65, 24, 65, "bfloat16"), (63, 17, 1, "float32")])
def test_int8_dequantisation_in_parallel_and_casting_copy(M: int, N: int, BM: int, dtype: str) -> None:
    """w8a16 as SophGo's fork ran it: int8 weights times a per-row scale, and loop indices as floats."""
    kernel = tilelang.compile(dequant_kernel(M, N, BM, dtype), target="tpu")
    q = torch.randint(-128, 128, (M, N), dtype=torch.int8)
    s = torch.rand(M).to(FLOATS[dtype])
    W, H = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N, dtype=FLOATS[dtype])
    J = torch.zeros(M, N)
    _run(kernel, q, W, s, H, J, inputs=(0, 2))
    torch.testing.assert_close(W, q.to(FLOATS[dtype]) * s[:, None], rtol=0, atol=0)
    assert torch.equal(H, q.to(FLOATS[dtype]))
    assert torch.equal(J, torch.arange(N)[None, :].float() + torch.arange(M)[:, None].float() * 0.5)


def cast_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def casts(
        X: T.Tensor((M, N), "float32"),
        Ints: T.Tensor((M, N), "int32"),
        B: T.Tensor((M, N), "int8"),
        U: T.Tensor((M, N), "uint8"),
        F: T.Tensor((M, N), "float16"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            i32 = T.alloc_fragment((BM, N), "int32")
            i8 = T.alloc_fragment((BM, N), "int8")
            u8 = T.alloc_fragment((BM, N), "uint8")
            f16 = T.alloc_fragment((BM, N), "float16")
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                i32[i, j] = T.cast(x[i, j], "int32")
                i8[i, j] = T.cast(T.cast(x[i, j], "int32"), "int8")
                u8[i, j] = T.cast(T.cast(x[i, j], "int8"), "uint8")
                f16[i, j] = T.cast(T.cast(x[i, j], "int32") * 3, "float16")
            T.copy(i32, Ints[bx * BM, 0])
            T.copy(i8, B[bx * BM, 0])
            T.copy(u8, U[bx * BM, 0])
            T.copy(f16, F[bx * BM, 0])

    return casts


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 36, 64), (1, 9, 1), (200, 65, 128)])
def test_casts_follow_c_truncation_and_wrap_around(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(cast_kernel(M, N, BM), target="tpu")
    x = torch.randn(M, N) * 300
    x[0, :4] = torch.tensor([-0.5, 0.99, -127.9, 255.5])[: min(4, N)]
    outs = [torch.zeros(M, N, dtype=d) for d in (torch.int32, torch.int8, torch.uint8, torch.float16)]
    _run(kernel, x, *outs, inputs=(0,))
    truncated = x.to(torch.int32)
    assert torch.equal(outs[0], truncated)
    assert torch.equal(outs[1], truncated.to(torch.int8))
    assert torch.equal(outs[2], truncated.to(torch.int8).to(torch.uint8))
    assert torch.equal(outs[3], (truncated * 3).to(torch.float16))


def band_kernel(M: int, N: int, BM: int, window: int, dtype: str) -> Any:
    @T.prim_func
    def band(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), dtype)
            y = T.alloc_fragment((BM, N), dtype)
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                y[i, j] = T.if_then_else(((bx * BM + i >= j) & (bx * BM + i - j < window)) | (j == 0), T.clamp(x[i, j], -0.5, 0.75), 0)
            T.copy(y, Y[bx * BM, 0])

    return band


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(130, 70, 64, "float32"), (65, 33, 63, "float16"), (128, 40, 128, "bfloat16")])
def test_band_mask_with_bitwise_and_or_and_clamp(M: int, N: int, BM: int, dtype: str) -> None:
    """Upstream's sliding-window spelling, ``(a) & (b) | (c)``, and ``T.clamp`` (NaN propagates)."""
    window = 5
    kernel = tilelang.compile(band_kernel(M, N, BM, window, dtype), target="tpu")
    x = torch.randn(M, N).to(FLOATS[dtype])
    x[1, 0] = float("nan")
    Y = torch.zeros(M, N, dtype=FLOATS[dtype])
    _run(kernel, x, Y, inputs=(0,))
    row, col = torch.arange(M)[:, None], torch.arange(N)[None, :]
    keep = ((row >= col) & (row - col < window)) | (col == 0)
    expected = torch.where(keep, x.clamp(-0.5, 0.75), torch.zeros((), dtype=x.dtype))
    torch.testing.assert_close(Y, expected, rtol=0, atol=0, equal_nan=True)


def math_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def math(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            y = T.alloc_fragment((BM, N), "float32")
            z = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                y[i, j] = 0.5 * x[i, j] * (1.0 + T.erf(x[i, j] * 0.7071067811865476))  # exact GELU
                z[i, j] = T.sin(x[i, j]) * T.cos(x[i, j] * 0.5)
            T.copy(y, Y[bx * BM, 0])
            T.copy(z, Z[bx * BM, 0])

    return math


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 50, 64), (65, 31, 65)])
def test_exact_gelu_sin_and_cos(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(math_kernel(M, N, BM), target="tpu")
    x = torch.randn(M, N) * 3
    Y, Z = torch.zeros(M, N), torch.zeros(M, N)
    _run(kernel, x, Y, Z, inputs=(0,))
    torch.testing.assert_close(Y, torch.nn.functional.gelu(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(Z, torch.sin(x) * torch.cos(x * 0.5), rtol=1e-4, atol=2e-5)


def rope_kernel(M: int, D: int, BM: int, dtype: str) -> Any:
    half = D // 2

    @T.prim_func
    def rope(X: T.Tensor((M, D), dtype), Cos: T.Tensor((M, D), dtype), Sin: T.Tensor((M, D), dtype), Y: T.Tensor((M, D), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, D), dtype)
            c = T.alloc_shared((BM, D), dtype)
            s = T.alloc_shared((BM, D), dtype)
            y = T.alloc_fragment((BM, D), dtype)
            T.copy(X[bx * BM, 0], x)
            T.copy(Cos[bx * BM, 0], c)
            T.copy(Sin[bx * BM, 0], s)
            for i, j in T.Parallel(BM, half):
                y[i, j] = x[i, j] * c[i, j] - x[i, j + half] * s[i, j]
                y[i, j + half] = x[i, j + half] * c[i, j + half] + x[i, j] * s[i, j + half]
            T.copy(y, Y[bx * BM, 0])

    return rope


@pytest.mark.parametrize(("M", "D", "BM", "dtype"), [(130, 64, 64, "float32"), (65, 32, 63, "float16"), (5, 16, 1, "bfloat16")])
def test_rope_rotate_half_reads_at_offsets(M: int, D: int, BM: int, dtype: str) -> None:
    kernel = tilelang.compile(rope_kernel(M, D, BM, dtype), target="tpu")
    t = FLOATS[dtype]
    x, angle = torch.randn(M, D).to(t), torch.rand(M, D) * 6
    cos, sin = angle.cos().to(t), angle.sin().to(t)
    Y = torch.zeros(M, D, dtype=t)
    _run(kernel, x, cos, sin, Y, inputs=(0, 1, 2))
    half = D // 2
    rotated = torch.cat([-x[:, half:], x[:, :half]], 1)
    expected = (x.float() * cos.float() + rotated.float() * sin.float()).to(t)
    tolerance = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    torch.testing.assert_close(Y, expected, rtol=tolerance, atol=tolerance)


def shift_rows_kernel(M: int, N: int, BM: int) -> Any:
    @T.prim_func
    def shift_rows(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), "float32")
            y = T.alloc_fragment((BM, N), "float32")
            z = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            T.fill(y, 0)
            for i, j in T.Parallel(BM - 1, N):
                y[i, j] = x[i + 1, j] - x[i, j]  # rows moved onto other lanes
            for i in T.serial(BM):
                for j in T.vectorized(N):
                    z[i, j] = x[i, j] * 2.0 + x[0, j]  # one row per iteration, row 0 broadcast read
            T.copy(y, Y[bx * BM, 0])
            T.copy(z, Z[bx * BM, 0])

    return shift_rows


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 40, 64), (65, 17, 65), (7, 9, 2)])
def test_row_shifted_reads_and_vectorized_rows(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(shift_rows_kernel(M, N, BM), target="tpu")
    x = torch.randn(M, N)
    Y, Z = torch.full((M, N), 7.0), torch.zeros(M, N)
    _run(kernel, x, Y, Z, inputs=(0,))
    blocks = x.split(BM)
    padded = [torch.cat([b, torch.zeros(BM - b.shape[0], N)]) for b in blocks]  # a block's overhang is zero-filled
    expected_y = torch.cat([torch.cat([p[1:] - p[:-1], torch.zeros(1, N)])[: b.shape[0]] for p, b in zip(padded, blocks, strict=True)])
    expected_z = torch.cat([b * 2.0 + b[0] for b in blocks])
    torch.testing.assert_close(Y, expected_y, rtol=0, atol=0)
    torch.testing.assert_close(Z, expected_z, rtol=0, atol=0)


def test_division_by_a_variable_is_refused_with_the_rewrite() -> None:
    M, N = 64, 16

    @T.prim_func
    def divide(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32"), k: T.int32):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, N), "int32")
            b = T.alloc_fragment((M, N), "int32")
            T.copy(A[0, 0], a)
            for i, j in T.Parallel(M, N):
                b[i, j] = a[i, j] // k
            T.copy(b, B[0, 0])

    with pytest.raises(ValueError, match=r"integer division by k[\s\S]*fix: divide by a positive integer constant"):
        tilelang.compile(divide, target="tpu")


def splitk_kernel(M: int, N: int, K: int, BM: int, BK: int, dtype: str, tile_form: bool = False) -> Any:
    @T.prim_func
    def splitk(A: T.Tensor((M, K), dtype), C: T.Tensor((M, N), dtype), B: T.Tensor((K, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), T.ceildiv(K, BK), threads=1) as (bx, bz):
            a = T.alloc_shared((BM, BK), dtype)
            b = T.alloc_shared((BK, N), dtype)
            c = T.alloc_fragment((BM, N), "float32")
            c_s = T.alloc_shared((BM, N), dtype)
            T.copy(A[bx * BM, bz * BK], a)
            T.copy(B[bz * BK, 0], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, c_s)
            if tile_form:
                T.atomic_add(C[bx * BM, 0], c_s)
            else:
                for i, j in T.Parallel(BM, N):
                    T.atomic_add(C[bx * BM + i, j], c_s[i, j])

    return splitk


@pytest.mark.parametrize(
    ("M", "N", "K", "BM", "BK", "dtype", "tile_form"),
    [(130, 48, 96, 64, 32, "float32", False), (65, 32, 64, 65, 16, "float16", False), (65, 32, 64, 64, 16, "float16", True)],
)
def test_atomic_add_inside_parallel_as_upstream_splitk_writes_it(
    M: int, N: int, K: int, BM: int, BK: int, dtype: str, tile_form: bool
) -> None:
    """Every K slice adds into C, the K slices in the innermost grid loop (consecutive blocks add
    into one region: that loop is not pipelined); under the default ``cores=max`` the grid runs on
    one core."""
    kernel = tilelang.compile(splitk_kernel(M, N, K, BM, BK, dtype, tile_form), target="tpu")
    t = FLOATS[dtype]
    a, b = torch.randn(M, K).to(t), torch.randn(K, N).to(t)
    c = torch.randn(M, N).to(t)
    start = c.clone()
    _run(kernel, a, c, b, inputs=(0, 2))
    expected = start.float() + a.float() @ b.float()
    tolerance = {"float32": 1e-4, "float16": 2e-2}[dtype]
    torch.testing.assert_close(c.float(), expected, rtol=tolerance, atol=tolerance)


def conv_kernel(M: int, N: int, taps: int, BM: int) -> Any:
    @T.prim_func
    def conv(X: T.Tensor((M, N + taps - 1), "float32"), W: T.Tensor((M, taps), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N + taps - 1), "float32")
            w = T.alloc_shared((BM, taps), "float32")
            y = T.alloc_fragment((BM, N), "float32")
            T.copy(X[bx * BM, 0], x)
            T.copy(W[bx * BM, 0], w)
            T.clear(y)
            for k in T.serial(taps):
                for i, t in T.Parallel(BM, N):
                    y[i, t] += w[i, k] * x[i, t + k]
            T.copy(y, Y[bx * BM, 0])

    return conv


@pytest.mark.parametrize(("M", "N", "taps", "BM"), [(130, 40, 4, 64), (63, 21, 3, 63)])
def test_depthwise_conv_taps_read_a_column_and_shifted_rows(M: int, N: int, taps: int, BM: int) -> None:
    """Causal conv1d's inner loop: a per-row tap ``w[i, k]`` broadcast along the row, ``x[i, t + k]`` shifted."""
    kernel = tilelang.compile(conv_kernel(M, N, taps, BM), target="tpu")
    x, w = torch.randn(M, N + taps - 1), torch.randn(M, taps)
    Y = torch.zeros(M, N)
    _run(kernel, x, w, Y, inputs=(0, 1))
    expected = sum(w[:, k : k + 1] * x[:, k : k + N] for k in range(taps))
    torch.testing.assert_close(Y, expected, rtol=1e-5, atol=1e-5)
