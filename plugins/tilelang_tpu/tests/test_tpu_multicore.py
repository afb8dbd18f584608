"""tpu:cores=N -- the T.Kernel grid split over BM1690 cores (grid.py), on the emulator.

Every multi-core kernel is run against torch *and* against its one-core build on the
same random inputs: the cores only split the grid, so the results must be bitwise
those of one core.  The grids do not divide by the core counts: 6 blocks on 4 cores
are chunks of 2, 2, 1, 1; on cores=8 they run on 6 cores (one block each).  Kernels are written as TileLang users write them
(unsorted and unused parameters, shapes that do not divide the tiles) and every run
checks that the inputs are left untouched.  Each kernel is compiled once per module.
"""

from functools import cache
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu import codegen, lowering, target
from tilelang_tpu.grid import launch_cores

from tilecore import TargetOptionError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
M, N, BM, BN = 130, 200, 64, 128  # a (2 x 3)-block grid whose last row and column blocks overhang


def _untouched(inputs: list[torch.Tensor], copies: list[torch.Tensor]) -> None:
    for x, x0 in zip(inputs, copies, strict=True):
        assert torch.equal(x, x0), "the kernel modified an input"


def _fma(dtype: str) -> Any:
    """C = A * B + A, element-wise."""

    @T.prim_func
    def fma(C: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), Unused: T.Tensor((4,), "float32"), A: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), dtype)
            b = T.alloc_shared((BM, BN), dtype)
            c = T.alloc_fragment((BM, BN), dtype)
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = a[i, j] * b[i, j] + a[i, j]
            T.copy(c, C[by * BM, bx * BN])

    return fma


@cache
def _fma_kernel(dtype: str, cores: int) -> Any:
    return tilelang.compile(_fma(dtype), target=f"tpu:cores={cores}")


def _run_fma(dtype: str, cores: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    unused = torch.zeros(4)
    c = torch.full((M, N), 3.0).to(DTYPES[dtype])
    _fma_kernel(dtype, cores)(c, b, unused, a)
    assert torch.equal(unused, torch.zeros(4)), "the kernel wrote an unused parameter"
    return c


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize(("dtype", "cores"), [("float32", 4), ("float32", 8), ("bfloat16", 8)])
def test_elementwise_split_over_cores(dtype: str, cores: int) -> None:
    """Against torch's a * b + a in the same dtype (one rounding per op): fp32 to 1e-6, bf16 to one
    bf16 ulp (2^-8); and bitwise against one core."""
    source = _fma_kernel(dtype, cores).get_kernel_source()
    assert f"ppl::set_core_num({min(cores, 6)});" in source and "get_core_index()" in source  # 6 blocks: at most 6 cores
    torch.manual_seed(cores)
    a, b = torch.randn(M, N).to(DTYPES[dtype]), torch.randn(M, N).to(DTYPES[dtype])
    a0, b0 = a.clone(), b.clone()
    c = _run_fma(dtype, cores, a, b)
    _untouched([a, b], [a0, b0])
    expected = a * b + a  # torch rounds after each op, as the TPU does (a temporary tile of the dtype)
    tolerance = 1e-6 if dtype == "float32" else 2.0**-8
    torch.testing.assert_close(c.float(), expected.float(), rtol=tolerance, atol=tolerance)
    assert torch.equal(c, _run_fma(dtype, 1, a, b)), "the multi-core result differs from one core"


def _softmax(rows: int, cols: int, block_rows: int) -> Any:
    """Row softmax: a max and a sum reduction per row, broadcast back over the row."""

    @T.prim_func
    def softmax(Y: T.Tensor((rows, cols), "float32"), X: T.Tensor((rows, cols), "float32")):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=1) as bx:
            x = T.alloc_shared((block_rows, cols), "float32")
            m = T.alloc_fragment((block_rows,), "float32")
            s = T.alloc_fragment((block_rows,), "float32")
            T.copy(X[bx * block_rows, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(block_rows, cols):
                x[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(block_rows, cols):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * block_rows, 0])

    return softmax


@pytest.mark.usefixtures("toolchain")
def test_row_reductions_split_over_three_cores() -> None:
    """Softmax over 200 rows in blocks of 63 (4 blocks, the last overhangs) on 3 cores (chunks 2, 1, 1):
    against torch to 1e-5 relative (PPL's range-reduced exp), and bitwise against one core."""
    rows, cols = 200, 96
    kernels = {cores: tilelang.compile(_softmax(rows, cols, 63), target=f"tpu:cores={cores}") for cores in (1, 3)}
    assert "ppl::set_core_num(3);" in kernels[3].get_kernel_source()
    torch.manual_seed(3)
    x = torch.randn(rows, cols) * 4
    x0 = x.clone()
    results = {}
    for cores, kernel in kernels.items():
        y = torch.full((rows, cols), float("nan"))
        kernel(y, x)
        _untouched([x], [x0])
        torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
        results[cores] = y
    assert torch.equal(results[3], results[1]), "the multi-core result differs from one core"


def _matmul(K: int, BK: int) -> Any:
    @T.prim_func
    def matmul(
        C: T.Tensor((M, 96), "float32"), A: T.Tensor((M, K), "float16"), Bias: T.Tensor((96,), "float32"), B: T.Tensor((K, 96), "float16")
    ):
        with T.Kernel(T.ceildiv(96, 64), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BK), "float16")
            b = T.alloc_shared((BK, 64), "float16")
            c = T.alloc_fragment((BM, 64), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
                T.copy(A[by * BM, k * BK], a)
                T.copy(B[k * BK, bx * 64], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * BM, bx * 64])

    return matmul


@pytest.mark.usefixtures("toolchain")
def test_gemm_split_over_four_cores_matches_one_core() -> None:
    """fp16 GEMM, fp32 accumulation, K = 80 over 32-wide tiles (the last one overhangs), 3 x 2 blocks
    on 4 cores; the unused Bias stays as it was.  Against torch: fp32 sums of exact fp16 products,
    1e-5 relative to the largest entry."""
    K = 80
    kernels = {cores: tilelang.compile(_matmul(K, 32), target=f"tpu:cores={cores}") for cores in (1, 4)}
    assert "ppl::set_core_num(4);" in kernels[4].get_kernel_source()
    torch.manual_seed(1)
    a, b, bias = torch.randn(M, K).half(), torch.randn(K, 96).half(), torch.randn(96)
    a0, b0, bias0 = a.clone(), b.clone(), bias.clone()
    expected = a.float() @ b.float()
    results = {}
    for cores, kernel in kernels.items():
        c = torch.full((M, 96), float("nan"))
        kernel(c, a, bias, b)
        _untouched([a, b, bias], [a0, b0, bias0])
        assert float((c - expected).abs().max() / expected.abs().max()) < 1e-5
        results[cores] = c
    assert torch.equal(results[4], results[1]), "the multi-core result differs from one core"


def _gemm_splitk(Mk: int, Nk: int, K: int, split: int) -> Any:
    """Upstream's examples/gemm_splitk: each K-slice adds its partial product into C."""

    @T.prim_func
    def gemm_splitk(A: T.Tensor((Mk, K), "float16"), B: T.Tensor((K, Nk), "float16"), C: T.Tensor((Mk, Nk), "float32")):
        with T.Kernel(T.ceildiv(Nk, 48), T.ceildiv(Mk, 64), split, threads=1) as (bx, by, bz):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 48), "float16")
            c = T.alloc_fragment((64, 48), "float32")
            T.clear(c)
            SK = T.ceildiv(K, split)
            for ko in T.Pipelined(T.ceildiv(SK, 64), num_stages=2):
                T.copy(A[by * 64, bz * SK + ko * 64], a)
                T.copy(B[bz * SK + ko * 64, bx * 48], b)
                T.gemm(a, b, c)
            T.atomic_add(C[by * 64, bx * 48], c)

    return gemm_splitk


@pytest.mark.usefixtures("toolchain")
def test_split_k_atomic_add_splits_over_the_output_blocks_only() -> None:
    """Split-K: the (bx, by) output blocks are split over cores and each core walks every K-slice
    bz of its blocks in the one-core order, so no two cores add into one region and C += A @ B is
    bitwise the one-core result (2 x 2 output blocks: cores=8 runs 4 cores).  Against torch: fp32
    sums of exact fp16 products, 1e-5 relative to the largest entry."""
    Mk, Nk, K, split = 100, 90, 512, 2
    kernels = {cores: tilelang.compile(_gemm_splitk(Mk, Nk, K, split), target=f"tpu:cores={cores}") for cores in (1, 8)}
    source = kernels[8].get_kernel_source()
    assert "ppl::set_core_num(4);" in source and "int grid_blocks = (2) * (2);" in source and "for (int bz = 0; bz < 2; ++bz)" in source
    torch.manual_seed(2)
    a, b = torch.randn(Mk, K).half(), torch.randn(K, Nk).half()
    a0, b0 = a.clone(), b.clone()
    c0 = torch.randn(Mk, Nk)
    expected = c0 + a.float() @ b.float()
    results = {}
    for cores, kernel in kernels.items():
        c = c0.clone()
        kernel(a, b, c)
        _untouched([a, b], [a0, b0])
        assert float((c - expected).abs().max() / expected.abs().max()) < 1e-5
        results[cores] = c
    assert torch.equal(results[8], results[1]), "the multi-core result differs from one core"


def _atomic_form(form: str) -> Any:
    """A split-K-like kernel whose T.atomic_add regions are *not* separated by every grid loop."""

    @T.prim_func
    def atomic_form(A: T.Tensor((128, 96), "float32"), C: T.Tensor((128, 96), "float32")):
        with T.Kernel(2, 2, 3, threads=1) as (bx, by, _bz):
            c = T.alloc_fragment((64, 48), "float32")
            T.copy(A[by * 64, bx * 48], c)
            if form == "same_region":  # every block adds into C[0:64, 0:48]
                T.atomic_add(C[0, 0], c)
            elif form == "overlapping_rows":  # by's regions overlap (rows by*32 .. by*32+63); bx's do not
                T.atomic_add(C[by * 32, bx * 48], c)
            elif form == "inner_loop":  # block by adds rows by*64 .. by*64+95: by's regions overlap
                for i in T.serial(2):
                    T.atomic_add(C[by * 64 + i * 32, bx * 48], c)
            else:  # C is also read by a plain copy
                T.copy(C[by * 64, bx * 48], c)
                T.atomic_add(C[by * 64, bx * 48], c)

    return atomic_form


@pytest.mark.parametrize(
    ("form", "split"),
    [("same_region", None), ("overlapping_rows", "int grid_blocks = (2);"), ("inner_loop", "int grid_blocks = (2);"), ("also_read", None)],
)
def test_atomic_add_regions_that_two_cores_could_share_stay_on_one_core(form: str, split: str | None) -> None:
    """Only grid loops whose blocks add into disjoint regions are split; the rest run whole on one core."""
    source = codegen.generate(*_device_module(_atomic_form(form)), "bm1690", cores=8)
    if split is None:
        assert "set_core_num" not in source
    else:
        assert "ppl::set_core_num(2);" in source and split in source and "for (int by = 0; by < 2; ++by)" in source


def _device_module(func: Any) -> tuple[Any, Any]:
    from tilelang.backend.target import determine_target
    from tvm import IRModule
    from tvm.ir import CallingConv

    tvm_target = determine_target("tpu", return_object=True)
    lowered = lowering.lower(IRModule({func.attrs["global_symbol"]: func}), tvm_target)
    kernels = {
        g: f
        for g, f in lowered.functions.items()
        if f.attrs is not None and f.attrs.get("calling_conv") == CallingConv.DEVICE_KERNEL_LAUNCH
    }
    return IRModule(kernels), tvm_target


def test_only_the_grid_is_split_never_a_serial_loop_nor_a_one_block_grid() -> None:
    """A T.serial loop right inside the grid stays a loop of every block (its iterations may depend
    on each other); a grid of one block runs on one core (nothing to split)."""

    @T.prim_func
    def rows(X: T.Tensor((256, 64), "float32"), Y: T.Tensor((256, 64), "float32")):
        with T.Kernel(2, threads=1) as bx:
            for k in T.serial(2):
                x = T.alloc_shared((64, 64), "float32")
                T.copy(X[bx * 128 + k * 64, 0], x)
                T.copy(x, Y[bx * 128 + k * 64, 0])

    source = codegen.generate(*_device_module(rows), "bm1690", cores=8)
    assert "int grid_blocks = (2);" in source and "for (int k = 0; k < 2; ++k)" in source

    @T.prim_func
    def single(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=1) as _:
            x = T.alloc_shared((64, 64), "float32")
            T.copy(X[0, 0], x)
            T.copy(x, Y[0, 0])

    assert "set_core_num" not in codegen.generate(*_device_module(single), "bm1690", cores=8)


def test_cores_are_validated_against_the_chip() -> None:
    assert target.cores_of("bm1690", "max") == 8 and target.cores_of("bm1684x", "max") == 1  # the default
    assert target.cores_of("bm1690", "3") == 3
    with pytest.raises(TargetOptionError, match=r"chip bm1690 cannot run a kernel on cores=9: it has 8 TPU cores"):
        target.check_cores("bm1690", 9)
    with pytest.raises(TargetOptionError, match=r"chip bm1684x cannot run a kernel on cores=2: .*tpu_kernel_launch"):
        tilelang.compile(_fma("float32"), target="tpu:chip=bm1684x,cores=2")
    with pytest.raises(TargetOptionError, match=r"does not accept cores='0'"):
        tilelang.compile(_fma("float32"), target="tpu:cores=0")
    # The runtime launches exactly the cores a library was compiled for.
    assert launch_cores("ppl::set_core_num(4);", 8) == 4
    with pytest.raises(ValueError, match=r"one integer literal in 1\.\.8"):
        launch_cores("set_core_num(n);", 8)
