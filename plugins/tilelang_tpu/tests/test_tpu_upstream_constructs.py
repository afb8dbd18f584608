"""Constructs upstream's own example and test kernels use that tpu refused, crashed on or got
wrong while tilelang's ``c`` target ran them (issue 18, benchmarks/upstream_kernels.py), written
the way users write kernels and run on the BM1690 emulator against torch: ``T.infinity`` in
fills, stores and selects; row reductions of 32-byte rows.  Tiles of 1, 63, 64, 65 and 128
rows, shapes that do not divide, every float dtype, inputs checked untouched.
"""

from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tpu_checks import FLOATS, run_checked

pytestmark = pytest.mark.usefixtures("toolchain")


def infinity_kernel(M: int, N: int, BM: int, dtype: str, sign: int) -> Any:
    """``T.fill`` of a tile and of a global tensor with ±inf, and a select of ±inf in T.Parallel."""

    @T.prim_func
    def infinity(
        Unused: T.Tensor((3,), "int32"),
        X: T.Tensor((M, N), dtype),
        Filled: T.Tensor((M, N), dtype),
        Selected: T.Tensor((M, N), dtype),
        Stored: T.Tensor((M,), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            f = T.alloc_fragment((BM, N), dtype)
            x = T.alloc_shared((BM, N), dtype)
            T.fill(f, sign * T.infinity(dtype))
            T.copy(f, Filled[bx * BM, 0])
            T.copy(X[bx * BM, 0], x)
            for i, j in T.Parallel(BM, N):
                x[i, j] = T.if_then_else(x[i, j] > 0, sign * T.infinity(dtype), x[i, j])
            T.copy(x, Selected[bx * BM, 0])
            T.fill(Stored[bx * BM : bx * BM + BM], sign * T.infinity("float32"))

    return infinity


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype", "sign"),
    [
        (1, 5, 1, "float32", 1),
        (130, 33, 64, "float32", -1),
        (63, 16, 63, "float16", 1),
        (65, 40, 65, "bfloat16", -1),
        (200, 8, 128, "float16", -1),
    ],
)
def test_infinity_is_infinite_in_fills_selects_and_stores(M: int, N: int, BM: int, dtype: str, sign: int) -> None:
    """tpu printed T.infinity as the largest finite value (65504 in fp16): a wrong result
    wherever the value reaches the user (upstream's test_tilelang_language_infinity)."""
    kernel = tilelang.compile(infinity_kernel(M, N, BM, dtype, sign), target="tpu")
    x = torch.randn(M, N).to(FLOATS[dtype])
    filled, selected = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N, dtype=FLOATS[dtype])
    stored = torch.zeros(M)
    run_checked(kernel, torch.arange(3, dtype=torch.int32), x, filled, selected, stored, inputs=(0, 1))
    inf = torch.tensor(sign * float("inf"), dtype=FLOATS[dtype])
    assert torch.equal(filled, torch.full_like(filled, sign * float("inf")))
    assert torch.equal(selected, torch.where(x > 0, inf, x))
    assert torch.equal(stored, torch.full_like(stored, sign * float("inf")))


def reduce_kernel(M: int, N: int, BM: int, dtype: str, kind: str, dim: int) -> Any:
    out_shape = (M,) if dim == 1 else (N,)
    reducer = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min, "abssum": T.reduce_abssum, "absmax": T.reduce_absmax}[kind]

    @T.prim_func
    def reduce(X: T.Tensor((M, N), dtype), Y: T.Tensor(out_shape, dtype)):
        with T.Kernel(T.ceildiv(M, BM) if dim == 1 else 1, threads=1) as bx:
            x = T.alloc_fragment((BM, N), dtype)
            y = T.alloc_fragment((BM,) if dim == 1 else (N,), dtype)
            T.copy(X[bx * BM, 0], x)
            reducer(x, y, dim=dim)
            if dim == 1:
                T.copy(y, Y[bx * BM])
            else:
                T.copy(y, Y)

    return reduce


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype", "kind", "dim"),
    [
        (4, 8, 4, "float32", "sum", 1),
        (130, 8, 64, "float32", "min", 1),
        (63, 16, 63, "float16", "sum", 1),
        (65, 16, 65, "bfloat16", "absmax", 1),
        (1, 16, 1, "float16", "max", 1),
        (8, 24, 8, "float32", "abssum", 0),
        (16, 5, 16, "bfloat16", "max", 0),
        (200, 8, 128, "float32", "max", 1),
    ],
)
def test_reduce_of_rows_of_32_bytes(M: int, N: int, BM: int, dtype: str, kind: str, dim: int) -> None:
    """Rows of 8 fp32 / 16 fp16 elements (reduced along dim 1, or 8/16 rows along dim 0) killed the
    emulator (upstream's CPU reduce tests; K1 of the differential run)."""
    kernel = tilelang.compile(reduce_kernel(M, N, BM, dtype, kind, dim), target="tpu", out_idx=[-1])
    x = torch.randn(M, N).to(FLOATS[dtype])
    before = x.clone()
    y = kernel(x)
    assert torch.equal(x, before)
    ref = {"sum": x.float().sum(dim), "max": x.float().amax(dim), "min": x.float().amin(dim)}.get(kind)
    if ref is None:
        ref = x.float().abs().sum(dim) if kind == "abssum" else x.float().abs().amax(dim)
    tol = 1e-5 if dtype == "float32" else 3e-2
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol * max(1, N if dim == 1 else M) ** 0.5)


def branch_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """``if``/``else`` inside T.Parallel: both branches storing one element (global and tile),
    a then-only store, a nested ``if``, a temporary bound before the branch, and a condition on
    data (not only on indices)."""

    @T.prim_func
    def branch(
        X: T.Tensor((M, N), dtype),
        Unused: T.Tensor((2, 2), "float32"),
        Y: T.Tensor((M, N), dtype),
        Z: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), dtype)
            z = T.alloc_fragment((BM, N), dtype)
            T.copy(X[bx * BM, 0], x)
            T.fill(z, 1)
            for i, j in T.Parallel(BM, N):
                row = bx * BM + i
                if 3 < row < 70:
                    Y[row, j] = X[row, j] * 2.0
                else:
                    Y[row, j] = X[row, j] * 0.5
            for i, j in T.Parallel(BM, N):
                t = x[i, j] * 3.0
                if x[i, j] > 0:
                    z[i, j] = t
                    if j >= 2:
                        z[i, j] = -t
                elif j < 5:
                    z[i, j] = x[i, j] - 1.0
            T.copy(z, Z[bx * BM, 0])

    return branch


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype"),
    [(1, 5, 1, "float32"), (130, 33, 64, "float32"), (63, 16, 63, "float16"), (65, 40, 65, "bfloat16"), (200, 24, 128, "float16")],
)
def test_if_else_inside_parallel(M: int, N: int, BM: int, dtype: str) -> None:
    """Upstream's test_tilelang_language_if_range (an ``if`` on the row inside T.Parallel, global
    tensors read and written directly) and the other forms a user writes."""
    kernel = tilelang.compile(branch_kernel(M, N, BM, dtype), target="tpu")
    x = torch.randn(M, N).to(FLOATS[dtype])
    y, z = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N, dtype=FLOATS[dtype])
    run_checked(kernel, x, torch.zeros(2, 2), y, z, inputs=(0, 1))
    row, col = torch.arange(M)[:, None], torch.arange(N)[None, :]
    xf = x.float()
    expected_y = torch.where((row > 3) & (row < 70), xf * 2.0, xf * 0.5)
    t = (xf * 3.0).to(x.dtype).float() if dtype != "float32" else xf * 3.0
    expected_z = torch.where(xf > 0, torch.where(col >= 2, -t, t), torch.where(col < 5, xf - 1.0, torch.ones_like(xf)))
    tol = 0 if dtype == "float32" else 1e-2
    torch.testing.assert_close(y.float(), expected_y.to(x.dtype).float(), rtol=tol, atol=tol)
    torch.testing.assert_close(z.float(), expected_z.to(x.dtype).float(), rtol=tol, atol=tol)


def global_mix_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """Global tensors read inside T.Parallel with other operations: a block, a per-row scale read
    straight from a global vector, a scalar read of a global element, into a tile and into a
    global tensor."""

    @T.prim_func
    def mix(
        Scale: T.Tensor((M,), "float32"),
        X: T.Tensor((M, N), dtype),
        Bias: T.Tensor((4,), "float32"),
        Y: T.Tensor((M, N), dtype),
        W: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            y = T.alloc_fragment((BM, N), dtype)
            for i, j in T.Parallel(BM, N):
                y[i, j] = X[bx * BM + i, j] * Scale[bx * BM + i] + Bias[2]
            T.copy(y, Y[bx * BM, 0])
            for i, j in T.Parallel(BM, N):
                W[bx * BM + i, j] = T.cast(X[bx * BM + i, j], "float32") - Bias[1]

    return mix


@pytest.mark.parametrize(
    ("M", "N", "BM", "dtype"), [(1, 7, 1, "float32"), (130, 33, 64, "float32"), (63, 64, 63, "float16"), (65, 40, 65, "bfloat16")]
)
def test_global_reads_with_other_operations_in_parallel(M: int, N: int, BM: int, dtype: str) -> None:
    kernel = tilelang.compile(global_mix_kernel(M, N, BM, dtype), target="tpu")
    scale, x, bias = torch.randn(M), torch.randn(M, N).to(FLOATS[dtype]), torch.randn(4)
    y, w = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N)
    run_checked(kernel, scale, x, bias, y, w, inputs=(0, 1, 2))
    tol = 1e-5 if dtype == "float32" else 2e-2
    torch.testing.assert_close(y.float(), (x.float() * scale[:, None] + bias[2]).to(x.dtype).float(), rtol=tol, atol=tol)
    torch.testing.assert_close(w, x.float() - bias[1], rtol=1e-6, atol=1e-6)


def global_copy_kernel(M: int, N: int, BM: int, BN: int, src: str, dst: str) -> Any:
    @T.prim_func
    def gcopy(A: T.Tensor((M, N), src), B: T.Tensor((M, N), dst), C: T.Tensor((N,), src), D: T.Tensor((N,), dst)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            T.copy(A[by * BM : (by + 1) * BM, bx * BN : (bx + 1) * BN], B[by * BM : (by + 1) * BM, bx * BN : (bx + 1) * BN])
            if bx == 0 and by == 0:
                T.copy(C, D)

    return gcopy


@pytest.mark.parametrize(
    ("M", "N", "BM", "BN", "src", "dst"),
    [
        (1, 5, 1, 5, "float32", "float32"),
        (130, 70, 64, 64, "float16", "float16"),
        (63, 33, 63, 32, "float32", "float16"),
        (65, 40, 65, 16, "bfloat16", "float32"),
        (300, 1000, 128, 1000, "float32", "float32"),
        (100, 3, 100, 3, "int32", "int32"),
    ],
)
def test_copy_from_global_to_global(M: int, N: int, BM: int, BN: int, src: str, dst: str) -> None:
    """Upstream's test_tilelang_language_copy: T.copy between two kernel tensors (blocks that
    overhang the edge, casts, a 1-D tensor, a region larger than one chunk)."""
    kernel = tilelang.compile(global_copy_kernel(M, N, BM, BN, src, dst), target="tpu")
    dtypes = {**FLOATS, "int32": torch.int32}
    a = (torch.randn(M, N) * 50).to(dtypes[src])
    c = (torch.randn(N) * 50).to(dtypes[src])
    b, d = torch.zeros(M, N, dtype=dtypes[dst]), torch.zeros(N, dtype=dtypes[dst])
    run_checked(kernel, a, b, c, d, inputs=(0, 2))
    assert torch.equal(b, a.to(dtypes[dst]))
    assert torch.equal(d, c.to(dtypes[dst]))


def half_gemm_kernel(M: int, N: int, K: int, BM: int, BN: int, BK: int, dtype: str) -> Any:
    """Upstream's CPU GEMM: 16-bit tiles read element by element in a T.grid nest, fp32 accumulator."""

    @T.prim_func
    def half_gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM)) as (bx, by):
            a = T.alloc_local((BM, BK), dtype)
            b = T.alloc_local((BK, BN), dtype)
            c = T.alloc_local((BM, BN), "float32")
            T.clear(c)
            for ko in T.Pipelined(T.ceildiv(K, BK), num_stages=0):
                T.copy(A[by * BM, ko * BK], a)
                T.copy(B[ko * BK, bx * BN], b)
                for i, j, k in T.grid(BM, BN, BK):
                    c[i, j] += a[i, k] * b[k, j]
            T.copy(c, C[by * BM, bx * BN])

    return half_gemm


@pytest.mark.parametrize(
    ("M", "N", "K", "BM", "BN", "BK", "dtype"),
    [(1, 5, 3, 1, 5, 3, "float16"), (65, 17, 20, 64, 16, 8, "bfloat16"), (63, 8, 33, 63, 8, 16, "float16")],
)
def test_per_element_reads_of_16_bit_tiles(M: int, N: int, K: int, BM: int, BN: int, BK: int, dtype: str) -> None:
    """Upstream's test_tilelang_cpu_gemm (fp16): the loop only reads the 16-bit tiles (fp32 shadows).

    ``a[i, k] * b[k, j]`` of two 16-bit values is a 16-bit product (rounded, as torch and CUDA round
    it), added to the fp32 accumulator in k order; so the reference is that sum, and it is exact.
    An fp32 ``a @ b`` reference differs by up to K rounding errors (0.04 for bf16, K = 20): it made
    this test fail about once in four random draws."""
    kernel = tilelang.compile(half_gemm_kernel(M, N, K, BM, BN, BK, dtype), target="tpu", out_idx=[-1])
    a, b = torch.randn(M, K).to(FLOATS[dtype]), torch.randn(K, N).to(FLOATS[dtype])
    before = (a.clone(), b.clone())
    c = kernel(a, b)
    assert torch.equal(a, before[0]) and torch.equal(b, before[1])
    accumulator = torch.zeros(M, N)
    for k in range(K):
        accumulator += (a[:, k, None] * b[None, k, :]).float()
    assert torch.equal(c, accumulator.to(FLOATS[dtype]))


def half_elements_kernel(M: int, N: int, BM: int, dtype: str) -> Any:
    """16-bit elements written and read back one at a time: a tile updated in place (overflow to
    inf), a T.alloc_var sum over a global 16-bit row stored to a global 16-bit vector."""

    @T.prim_func
    def half_elements(X: T.Tensor((M, N), dtype), Unused: T.Tensor((1,), "int32"), Y: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            x = T.alloc_shared((BM, N), dtype)
            acc = T.alloc_var("float32")
            T.copy(X[bx * BM, 0], x)
            for i in T.serial(BM):
                x[i, 0] = x[i, 0] * 3.0 + x[i, N - 1]
                x[i, N - 1] = x[i, 0] * 30000.0
            T.copy(x, Y[bx * BM, 0])
            for i in T.serial(BM):
                acc = 0.0
                for j in T.serial(N):
                    acc += X[bx * BM + i, j]
                S[bx * BM + i] = acc

    return half_elements


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(1, 3, 1, "float16"), (70, 5, 64, "bfloat16"), (63, 4, 63, "float16")])
def test_per_element_writes_of_16_bit_elements(M: int, N: int, BM: int, dtype: str) -> None:
    kernel = tilelang.compile(half_elements_kernel(M, N, BM, dtype), target="tpu")
    t = FLOATS[dtype]
    x = torch.randn(M, N).to(t)
    y, s = torch.zeros(M, N, dtype=t), torch.zeros(M, dtype=t)
    run_checked(kernel, x, torch.zeros(1, dtype=torch.int32), y, s, inputs=(0, 1))
    expected = x.clone()
    expected[:, 0] = (x[:, 0].float() * 3.0 + x[:, N - 1].float()).to(t)
    expected[:, N - 1] = (expected[:, 0].float() * 30000.0).to(t)  # |x| > 2.2 overflows fp16 to inf
    assert torch.equal(y, expected)
    sums = torch.zeros(M)
    for j in range(N):  # the c target's order: fp32 adds of the 16-bit elements
        sums = sums + x[:, j].float()
    assert torch.equal(s, sums.to(t))


def cumsum_rows_kernel(M: int, N: int, dtype: str, reverse: bool, one_d: bool) -> Any:
    shape = (M,) if one_d else (M, N)

    @T.prim_func
    def cumsum_rows(X: T.Tensor(shape, dtype), Y: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_shared(shape, dtype)
            y = T.alloc_fragment(shape, dtype)
            T.copy(X, x)
            T.cumsum(src=x, dst=y, dim=0, reverse=reverse)
            T.copy(y, Y)

    return cumsum_rows


@pytest.mark.parametrize(
    ("M", "N", "dtype", "reverse", "one_d"),
    [
        (1, 5, "float32", False, False),
        (32, 32, "float32", False, False),
        (63, 7, "float16", True, False),
        (65, 16, "bfloat16", False, False),
        (128, 3, "float32", True, False),
        (130, 1, "float32", False, True),
    ],
)
def test_cumsum_along_the_rows(M: int, N: int, dtype: str, reverse: bool, one_d: bool) -> None:
    """Upstream's test_tilelang_language_scan dim=0 (was refused): a scan across the lanes."""
    kernel = tilelang.compile(cumsum_rows_kernel(M, N, dtype, reverse, one_d), target="tpu", out_idx=[-1])
    x = torch.randn((M,) if one_d else (M, N)).to(FLOATS[dtype])
    before = x.clone()
    y = kernel(x)
    assert torch.equal(x, before)
    xf = x.float()
    expected = xf.flip(0).cumsum(0).flip(0) if reverse else xf.cumsum(0)
    tol = 1e-4 if dtype == "float32" else 5e-2
    torch.testing.assert_close(y.float(), expected, rtol=tol, atol=tol * 4)


def thread_guard_kernel(M: int, N: int, BM: int, dtype: str, low: int) -> Any:
    """Upstream's mask-op tests: tile-level work under a guard on the thread index."""

    @T.prim_func
    def guarded(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, BM), threads=256) as bx:
            a = T.alloc_shared((BM, N), dtype)
            c = T.alloc_fragment((BM, N), dtype)
            T.fill(c, 7)
            tx = T.get_thread_binding(0)
            if tx >= low and tx < 256:  # some thread passes when low < 256
                for i, j in T.Parallel(BM, N):
                    a[i, j] = A[bx * BM + i, j]
            if tx < 128:
                T.copy(a, B[bx * BM, 0])
            if tx >= 1000:  # no thread passes: not done
                T.fill(c, 1)
            T.copy(c, C[bx * BM, 0])

    return guarded


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(1, 5, 1, "float32"), (130, 33, 64, "float16"), (65, 40, 65, "bfloat16")])
def test_tile_work_under_a_thread_index_guard(M: int, N: int, BM: int, dtype: str) -> None:
    from tilelang_tpu.codegen import TpuCodegenError

    try:
        kernel = tilelang.compile(thread_guard_kernel(M, N, BM, dtype, 128), target="tpu")
    except TpuCodegenError as err:
        # tilelang 0.1.14 binds the thread index another way (docs/tilelang-releases.md): the guard is
        # not resolved there and the kernel keeps the named per-thread-indexing refusal, never a wrong result.
        if not tilelang.__version__.startswith("0.1.14") or "per-thread indexing" not in str(err):
            raise
        pytest.skip("tilelang 0.1.14: a thread-index guard stays per-thread indexing, refused by name")
    a = torch.randn(M, N).to(FLOATS[dtype])
    b, c = torch.zeros(M, N, dtype=FLOATS[dtype]), torch.zeros(M, N, dtype=FLOATS[dtype])
    run_checked(kernel, a, b, c, inputs=(0,))
    assert torch.equal(b, a)
    assert torch.equal(c, torch.full_like(c, 7))


def reshape_kernel(N: int, M: int, dtype: str, both: bool) -> Any:
    """Upstream's test_tilelang_language_reshape: a kernel tensor read through T.reshape."""

    @T.prim_func
    def reshaped(Unused: T.Tensor((2,), "int32"), A: T.Tensor((N,), dtype), B: T.Tensor((N // M, M), dtype)):
        with T.Kernel(1, threads=1) as _:
            a = T.reshape(A, [N // M, M])
            x = T.alloc_fragment((N // M, M), dtype)
            T.copy(a, x)
            for i, j in T.Parallel(N // M, M):
                x[i, j] = x[i, j] * 2.0
            if both:
                x[0, 0] = A[1]
            T.copy(x, B)

    return reshaped


@pytest.mark.parametrize(("N", "M", "dtype"), [(1024, 32, "float32"), (130, 65, "float16"), (64, 1, "bfloat16")])
def test_reshape_of_a_kernel_tensor(N: int, M: int, dtype: str) -> None:
    kernel = tilelang.compile(reshape_kernel(N, M, dtype, False), target="tpu", out_idx=[-1])
    a = torch.randn(N).to(FLOATS[dtype])
    before = a.clone()
    b = kernel(torch.zeros(2, dtype=torch.int32), a)
    assert torch.equal(a, before)
    assert torch.equal(b, (a.float() * 2.0).to(a.dtype).reshape(N // M, M))


def test_reshape_used_beside_the_declared_shape_is_refused_by_name() -> None:
    from tilelang_tpu.codegen import TpuCodegenError

    with pytest.raises(TpuCodegenError) as info:
        tilelang.compile(reshape_kernel(64, 8, "float32", True), target="tpu", out_idx=[-1])
    assert "T.reshape/T.view of global tensor A" in str(info.value) and "declared shape" in str(info.value)


def im2col_kernel(N: int, H: int, W: int, C: int, KH: int, S: int, D: int, P: int, BM: int, BK: int, dtype: str) -> Any:
    OH, OW = (H + 2 * P - D * (KH - 1) - 1) // S + 1, (W + 2 * P - D * (KH - 1) - 1) // S + 1
    rows, cols = N * OH * OW, KH * KH * C

    @T.prim_func
    def im2col(X: T.Tensor((N, H, W, C), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(cols, BK), T.ceildiv(rows, BM), threads=128) as (bx, by):
            col = T.alloc_shared((BM, BK), dtype)
            T.im2col(X, col, by, bx, KH, S, D, P)
            T.copy(col, Y[by * BM, bx * BK])

    return im2col


def _im2col_reference(x: torch.Tensor, KH: int, S: int, D: int, P: int) -> torch.Tensor:
    N, H, W, C = x.shape
    OH, OW = (H + 2 * P - D * (KH - 1) - 1) // S + 1, (W + 2 * P - D * (KH - 1) - 1) // S + 1
    padded = torch.zeros(N, H + 2 * P, W + 2 * P, C, dtype=x.dtype)
    padded[:, P : P + H, P : P + W] = x
    out = torch.zeros(N, OH, OW, KH, KH, C, dtype=x.dtype)
    for kh in range(KH):
        for kw in range(KH):
            out[:, :, :, kh, kw] = padded[:, kh * D : kh * D + S * (OH - 1) + 1 : S, kw * D : kw * D + S * (OW - 1) + 1 : S]
    return out.reshape(N * OH * OW, KH * KH * C)


@pytest.mark.parametrize(
    ("N", "H", "W", "C", "KH", "S", "D", "P", "BM", "BK", "dtype"),
    [(1, 5, 4, 3, 3, 1, 1, 1, 16, 9, "float32"), (2, 6, 6, 4, 3, 2, 1, 1, 16, 12, "float16"), (1, 7, 5, 2, 2, 1, 2, 0, 8, 5, "bfloat16")],
)
def test_im2col(N: int, H: int, W: int, C: int, KH: int, S: int, D: int, P: int, BM: int, BK: int, dtype: str) -> None:
    """Upstream's convolution example: T.im2col (stride, dilation, padding; blocks that overhang)."""
    kernel = tilelang.compile(im2col_kernel(N, H, W, C, KH, S, D, P, BM, BK, dtype), target="tpu", out_idx=[-1])
    x = torch.randn(N, H, W, C).to(FLOATS[dtype])
    before = x.clone()
    y = kernel(x)
    assert torch.equal(x, before)
    assert torch.equal(y, _im2col_reference(x, KH, S, D, P))
