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
import torch.nn.functional as F
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


@pytest.mark.parametrize(
    ("M", "N", "Kd", "BM", "BN", "dtype"),
    [(65, 33, 40, 16, 16, "float32"), (63, 64, 17, 32, 8, "float32"), (1, 5, 3, 1, 5, "int32"), (128, 24, 9, 64, 24, "int32")],
)
def test_hand_written_gemm_in_serial_loops(M: int, N: int, Kd: int, BM: int, BN: int, dtype: str) -> None:
    """c[i, j] += a[i, k] * b[k, j] on a T.alloc_local accumulator, edge blocks clipped."""
    kernel = tilelang.compile(K.serial_gemm(M, N, Kd, BM, BN, dtype, dtype), target="tpu", out_idx=[-1])
    a, b = _rand((M, Kd), dtype), _rand((Kd, N), dtype)
    if dtype == "float32":
        torch.testing.assert_close(_run(kernel, a, b), a @ b, rtol=1e-5, atol=1e-4)
    else:
        assert torch.equal(_run(kernel, a, b), (a.long() @ b.long()).int())


@pytest.mark.parametrize(("M", "N", "dtype"), [(1, 7, "float32"), (65, 64, "float32"), (63, 130, "int32")])
def test_alloc_var_accumulates_tensor_elements(M: int, N: int, dtype: str) -> None:
    kernel = tilelang.compile(K.row_sum_var(M, N, dtype), target="tpu", out_idx=[-1])
    a = _rand((M, N), dtype)
    out = _run(kernel, a)
    if dtype == "float32":
        torch.testing.assert_close(out, a.sum(1), rtol=1e-5, atol=1e-4)
    else:
        assert torch.equal(out, a.sum(1).int())


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 33, 64), (63, 8, 63), (1, 100, 1), (128, 65, 128)])
def test_scalar_reads_of_tile_elements_argmax(M: int, N: int, BM: int) -> None:
    """if x[i, j] > best: ... over a staged tile; rows past the tensor's end are not stored."""
    kernel = tilelang.compile(K.row_argmax(M, N, BM), target="tpu", out_idx=[1, 2])
    x = torch.randn(M, N)
    idx, val = _run(kernel, x)  # type: ignore[misc]
    assert torch.equal(idx, x.argmax(1).int())
    assert torch.equal(val, x.amax(1))


@pytest.mark.parametrize("n", [0, 1, 37, 64])
def test_runtime_length_loop_and_while(n: int) -> None:
    M, N = 65, 64
    kernel = tilelang.compile(K.prefix_len(M, N), target="tpu", out_idx=[2, 3])
    a = torch.randn(M, N).abs() * torch.where(torch.rand(M, N) < 0.1, -1.0, 1.0)
    a[3] = 1.0  # a row of only positives: the while stops at the end
    s, length = _run(kernel, a, n)  # type: ignore[misc]
    torch.testing.assert_close(s, a[:, :n].sum(1), rtol=1e-5, atol=1e-5)
    positive = (a > 0).int().cumprod(1).sum(1).int()
    assert torch.equal(length, positive)


@pytest.mark.parametrize("cores", ["1", "max"])
def test_scalar_atomics_histogram(cores: str) -> None:
    M, bins, BM = 300, 17, 64
    kernel = tilelang.compile(K.histogram(M, bins, BM), target=f"tpu:cores={cores}")
    ids = torch.randint(0, bins, (M,), dtype=torch.int32)
    w = torch.randn(M)
    h, x = torch.zeros(bins), torch.full((bins,), -1e30)
    ids_before, w_before = ids.clone(), w.clone()
    kernel(ids, w, h, x)  # H and X are updated in place
    assert torch.equal(ids, ids_before) and torch.equal(w, w_before), "the kernel wrote one of its inputs"
    ref_h = torch.zeros(bins).index_add_(0, ids.long(), w)
    ref_x = torch.full((bins,), -1e30).scatter_reduce_(0, ids.long(), w, "amax")
    torch.testing.assert_close(h, ref_h, rtol=1e-5, atol=1e-5)
    assert torch.equal(x, ref_x)


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(130, 24, 64, "float32"), (65, 8, 65, "int32"), (1, 40, 1, "float32")])
def test_cummax_transpose_atomic_max(M: int, N: int, BM: int, dtype: str) -> None:
    kernel = tilelang.compile(K.tile_scans(M, N, BM, dtype), target="tpu")
    x = _rand((M, N), dtype)
    row, col, tr = torch.zeros_like(x), torch.zeros_like(x), torch.zeros(N, M, dtype=x.dtype)
    mx = torch.full((BM, N), -1000, dtype=x.dtype)
    before = x.clone()
    kernel(x, row, col, tr, mx)
    assert torch.equal(x, before), "the kernel wrote one of its inputs"
    assert torch.equal(row, x.cummax(1).values)
    # The reversed column scan runs over each block's tile, the last one's overhang zero-filled.
    padded = torch.cat([x, torch.zeros((-M % BM, N), dtype=x.dtype)]).reshape(-1, BM, N)
    scanned = padded.flip(1).cummax(1).values.flip(1).reshape(-1, N)[:M]
    assert torch.equal(col, scanned)
    assert torch.equal(tr, x.T)
    # Each block's tile of x, the last one's overhang zero-filled (out-of-bounds reads give 0).
    blocks = torch.cat([x, torch.zeros((-M % BM, N), dtype=x.dtype)]).reshape(-1, BM, N)
    expected = torch.maximum(blocks.amax(0), torch.full((BM, N), -1000, dtype=x.dtype))
    if dtype == "float32":
        assert torch.equal(mx, expected)


@pytest.mark.parametrize(("M", "N", "BM"), [(130, 33, 64), (1, 5, 1), (64, 64, 64)])
def test_bit_reductions(M: int, N: int, BM: int) -> None:
    kernel = tilelang.compile(K.bit_reduce(M, N, BM), target="tpu", out_idx=[1, 2, 3])
    x = torch.randint(-(2**31), 2**31 - 1, (M, N), dtype=torch.int32)
    xo, ao, oo = _run(kernel, x)  # type: ignore[misc]
    ex, ea, eo = x[:, 0].clone(), x[:, 0].clone(), x[:, 0].clone()
    for j in range(1, N):
        ex ^= x[:, j]
        ea &= x[:, j]
        eo |= x[:, j]
    assert torch.equal(xo, ex) and torch.equal(ao, ea) and torch.equal(oo, eo)


@pytest.mark.parametrize(("M", "N", "BM", "dtype"), [(130, 24, 64, "float32"), (64, 5, 64, "int32"), (1, 3, 1, "float32")])
def test_global_tensors_in_parallel_and_fill(M: int, N: int, BM: int, dtype: str) -> None:
    """The vector path has no form for these: they run per element (serial loops of the scalar unit)."""
    kernel = tilelang.compile(K.global_parallel(M, N, BM, dtype), target="tpu", out_idx=[1, 2])
    a = _rand((M, N), dtype)
    c, f = _run(kernel, a)  # type: ignore[misc]
    assert torch.equal(f, torch.full((M, N), 3, dtype=a.dtype))
    torch.testing.assert_close(c, a * 2 + a.roll(-1, 1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scalar_float_max_keeps_the_fraction(dtype: str) -> None:
    """tpu-diff's W1: the scalar max of T.cast(j) / 2 was 7.0 for 7.5."""
    kernel = tilelang.compile(K.scalar_float_max(16, dtype), target="tpu", out_idx=[-1])
    out = _run(kernel, _rand((1, 16), dtype))
    assert float(out[0]) == 7.5  # type: ignore[index]


@pytest.mark.parametrize(("N", "D", "blk_m", "dtype"), [(64, 128, 1, "float32"), (64, 128, 1, "bfloat16"), (65, 96, 1, "float16")])
def test_upstream_layernorm_compiles_and_matches(N: int, D: int, blk_m: int, dtype: str) -> None:
    """Issue 18 item 7: upstream's LayerNorm (blk_m=1) made ppl-compile 1.30.2 SIGSEGV."""
    kernel = tilelang.compile(K.layernorm_rows(N, D, blk_m, dtype), target="tpu", out_idx=[-3, -2, -1])
    tdt = getattr(torch, dtype)
    x, g, b = torch.randn(N, D).to(tdt), torch.randn(D).to(tdt), torch.randn(D).to(tdt)
    y, mean, rstd = _run(kernel, x, g, b)  # type: ignore[misc]
    xf = x.float()
    ref = F.layer_norm(xf, (D,), g.float(), b.float(), eps=1e-5)
    tol = 1e-5 if dtype == "float32" else 2e-2
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(mean, xf.mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd, torch.rsqrt(xf.var(1, unbiased=False) + 1e-5), rtol=1e-4, atol=1e-4)


def test_parallel_without_vector_form_runs_per_element() -> None:
    """A T.Parallel the vector path refuses (a global read combined with arithmetic, a temporary
    used after a store to the buffer it reads) runs per element: one valid schedule of it."""
    from test_tpu_codegen import _global_read_in_parallel, _stale_temporary

    a = torch.randn(64, 64)
    read = tilelang.compile(_global_read_in_parallel(), target="tpu", out_idx=[-1])
    torch.testing.assert_close(_run(read, a), a + 1.0, rtol=0, atol=0)
    stale = tilelang.compile(_stale_temporary(), target="tpu", out_idx=[-1])
    torch.testing.assert_close(_run(stale, a), a * 2.0, rtol=0, atol=0)
