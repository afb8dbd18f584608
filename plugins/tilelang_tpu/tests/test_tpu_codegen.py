"""The PPL code generator on real TileLang kernels: the text it emits, that
ppl-compile accepts it for BM1690 and BM1684X, and the errors for what it does
not support.  (Running the kernels against torch: test_tpu_codegen_e2e.py.)"""

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tilelang
import tilelang.language as T
from tilelang_tpu import codegen, lowering, setup
from tpu_kernels import copy_kernel, matmul_kernel, row_reduce_kernel, softmax_kernel

# ---------------------------------------------------------------------------- kernels


def axpy_kernel(M: int, N: int, BM: int, BN: int) -> Any:
    @T.prim_func
    def axpy(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), "float32")
            b = T.alloc_shared((BM, BN), "float32")
            c = T.alloc_fragment((BM, BN), "float32")
            T.copy(A[by * BM, bx * BN], a)
            T.copy(B[by * BM, bx * BN], b)
            for i, j in T.Parallel(BM, BN):
                c[i, j] = a[i, j] * 2.0 + b[i, j]
            T.copy(c, C[by * BM, bx * BN])

    return axpy


def mixed_kernel(M: int, N: int) -> Any:
    @T.prim_func
    def mixed(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.fill(c, 1.5)
            T.copy(A, a)
            for i, j in T.Parallel(M, N):
                c[i, j] = T.exp(T.cast(a[i, j], "float32")) + T.max(c[i, j], 0.0)
            for _k in T.serial(2):
                for i, j in T.Parallel(M, N):
                    c[i, j] = c[i, j] * 0.5
            T.copy(c, C)

    return mixed


# ---------------------------------------------------------------------------- helpers


def device_module(func: Any, target: str = "tpu") -> tuple[Any, Any]:
    """(device IRModule, TVM target) of ``func`` lowered for ``target``, as the tpu backend lowers it."""
    from tilelang.backend.target import determine_target
    from tvm import IRModule
    from tvm.ir import CallingConv

    tvm_target = determine_target(target, return_object=True)
    lowered = lowering.lower(IRModule({func.attrs["global_symbol"]: func}), tvm_target)
    kernels = {
        g: f
        for g, f in lowered.functions.items()
        if f.attrs is not None and f.attrs.get("calling_conv") == CallingConv.DEVICE_KERNEL_LAUNCH
    }
    return IRModule(kernels), tvm_target


def ppl_of(func: Any) -> str:
    """The PPL the tpu backend generates for ``func``."""
    device, tvm_target = device_module(func)
    return codegen.generate(device, tvm_target, "bm1690")


def ppl_compile(source: str, chip: str, toolchain: setup.TpuToolchain, workdir: Path) -> subprocess.CompletedProcess[str]:
    path = workdir / f"k_{chip}.pl"
    path.write_text(source)
    cmd = [
        str(toolchain.ppl_compile),
        str(path),
        "--I",
        str(toolchain.include_dir),
        "--chip",
        toolchain.chip_code(chip),
        "--O2",
        "-o",
        str(workdir / f"gen_{chip}"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=toolchain.process_env(), timeout=120, check=False)


KERNELS: dict[str, Callable[[], Any]] = {
    "copy_edge": lambda: copy_kernel(130, 300, 64, 128),
    "copy_f16": lambda: copy_kernel(64, 256, 64, 256, "float16"),
    "axpy": lambda: axpy_kernel(130, 300, 64, 128),
    "mixed": lambda: mixed_kernel(64, 256),
    "reduce_max": lambda: row_reduce_kernel(130, 300, 64, "max"),
    "reduce_min": lambda: row_reduce_kernel(130, 300, 64, "min"),
    "reduce_abssum": lambda: row_reduce_kernel(64, 100, 64, "abssum"),
    "matmul_f16": lambda: matmul_kernel(128, 128, 256, 64, 64, 64, "float16"),
    "matmul_bf16_nt": lambda: matmul_kernel(64, 64, 128, 64, 64, 64, "bfloat16", transpose_b=True),
    "matmul_f32": lambda: matmul_kernel(128, 64, 128, 64, 64, 64, "float32"),
    "softmax": lambda: softmax_kernel(100, 200, 64),
}

# ---------------------------------------------------------------------------- structure


def test_entry_signature_follows_abi() -> None:
    src = ppl_of(axpy_kernel(130, 300, 64, 128))
    kernels = re.findall(r"__KERNEL__ void (\w+)\((.*)\)", src)
    assert kernels == [("axpy_kernel", "fp32 *ptr_0, fp32 *ptr_1, fp32 *ptr_2")]
    assert '#include "ppl.h"' in src


def test_elementwise_is_whole_tile_ops_with_edge_tiles() -> None:
    src = ppl_of(axpy_kernel(130, 300, 64, 128))
    # Tile-level PPL: DMA of whole tiles, one tiu op per arithmetic operation, no per-element loops.
    assert src.count("dma::load(") == 2 and src.count("dma::store(") == 1
    assert "tiu::fmul(t, a, 2.0f);" in src and "tiu::fadd(c, t, b);" in src
    assert len(re.findall(r"\bfor \(", src)) == 2  # the two block loops only
    # 130 x 300 does not divide into 64 x 128 tiles: runtime-clipped extents, zero-filled loads.
    assert "min(64, 130 - (by * 64))" in src and "min(128, 300 - (bx * 128))" in src
    assert "dma::zero(a)" in src


def test_divisible_shapes_need_no_clipping() -> None:
    src = ppl_of(copy_kernel(128, 256, 64, 128))
    assert "min(" not in src and "zero(" not in src
    assert "dma::load(a, g_A.sub_view(" in src


def test_grid_loop_pipelined_only_when_safe() -> None:
    axpy = ppl_of(axpy_kernel(130, 300, 64, 128))
    assert re.search(r"for \(int by = 0; by < 3; \+\+by\) \{\n\s+ppl::enable_pipeline\(\);", axpy)
    # In-place updates (x = exp(x - m)) crash ppl-compile 1.7 when pipelined; a nested loop is
    # the one to pipeline.  Neither kernel gets a pipelined grid loop.
    assert "enable_pipeline" not in ppl_of(softmax_kernel(100, 200, 64))
    assert "enable_pipeline" not in ppl_of(mixed_kernel(64, 256))
    matmul = ppl_of(matmul_kernel(128, 128, 256, 64, 64, 64, "float16"))
    assert matmul.count("ppl::enable_pipeline();") == 1  # the T.Pipelined K loop only


def test_fill_cast_exp_and_serial_loop() -> None:
    src = ppl_of(mixed_kernel(64, 256))
    assert "tiu::fill(c, 1.5f);" in src
    assert re.search(r"tiu::cast\(\w+, a\);", src)
    assert "fexp(" in src and "tiu::fmax(" in src
    assert "for (int _k = 0; _k < 2; ++_k)" in src


def test_reductions_use_pooling_with_row_padding() -> None:
    src = ppl_of(row_reduce_kernel(130, 300, 64, "max"))
    assert "quick_pooling(" in src
    # the reduced rows are padded to whole execution units in local memory
    assert re.search(r"dim4 \w+_block = \{1, 64, 1, 320\};", src)
    src_min = ppl_of(row_reduce_kernel(130, 300, 64, "min"))
    assert "-1.0f" in src_min  # min = -max(-x)


def test_gemm_forms() -> None:
    f16 = ppl_of(matmul_kernel(128, 128, 256, 64, 64, 64, "float16"))
    # T.clear(c) before the K loop is no fill: the first K step overwrites (codegen.plan.first_step_gemm).
    assert re.search(r"tiu::fmm2_nn\(c, a, b, \(k\w* != 0\)\);", f16) and "ppl::enable_pipeline();" in f16
    assert "tiu::fill(c," not in f16
    nt = ppl_of(matmul_kernel(64, 64, 128, 64, 64, 64, "bfloat16", transpose_b=True))
    assert re.search(r"tiu::fmm2_nt\(c, a, b, \(k\w* != 0\)\);", nt)
    f32 = ppl_of(matmul_kernel(128, 64, 128, 64, 64, 64, "float32"))
    assert re.search(r"tiu::fmm\(c, a, b, \(k\w* != 0\)\);", f32)
    assert "dim4 a_block = {64, 1, 1, 64};" in f32  # mm v1 operand layout: rows on N


@pytest.mark.usefixtures("toolchain")
def test_flash_attention_overwriting_gemm_and_hoisted_mask() -> None:
    """No fill of the score tile before its first GEMM (the GEMM overwrites it), and the
    causal mask's index tiles built once, before every loop (in the loops only the scalar
    limit and the select remain)."""
    from tpu_upstream_kernels import flash_attention_kernel

    def ppl_of(func: Any) -> str:  # through tilelang.compile: its lowering folds T.infinity
        return str(tilelang.compile(func, target="tpu:cores=1", out_idx=[3]).get_kernel_source())

    plain = ppl_of(flash_attention_kernel(1, 2, 256, 64, False))
    body = plain[plain.index("for (") :]
    first_gemm = body.index("tiu::fmm2_nt(")
    assert "tiu::fill(acc_s," not in body[:first_gemm]
    assert re.search(r"tiu::fmm2_nt\(acc_s, Q_shared, K_shared, false\);", body)
    assert "tiu::fmm2_nn(acc_o, acc_s_cast, V_shared, true);" in body  # acc_o still accumulates

    causal = ppl_of(flash_attention_kernel(1, 2, 256, 64, True))
    first_loop = causal.index("\n  for (")  # the first loop of the kernel body (the grid)
    prologue, loops = causal[:first_loop], causal[first_loop:]
    assert prologue.count("arange_broadcast(") == 2 and "tiu::transpose_wc(" in prologue
    assert "arange_broadcast(" not in loops and "tiu::transpose_wc(" not in loops
    assert re.search(r"tiu::fsub\(mask_index\w*, ", prologue)
    assert re.search(r"tiu::gt_select\(acc_s, mask_index\w*, limit\w*, ", loops)
    assert re.search(r"float limit\w* = -0\.5f - \(float\)\(", loops)
    assert re.search(r"tiu::fmm2_nt\(acc_s, Q_shared, K_shared, true\);", loops)  # onto the mask


def test_softmax_broadcasts_row_vectors() -> None:
    src = ppl_of(softmax_kernel(100, 200, 64))
    assert src.count("quick_pooling(") == 2
    # A stride-0 W view of the per-row max / sum that keeps the real C stride (row r+64
    # lives in the same lane as row r, one aligned row group further).
    assert ".view(" in src
    assert "dim4 bstride = {div_up(64, LANE_NUM) * align(1 * 1, get_eu_num<fp32>()), align(1 * 1, get_eu_num<fp32>()), 1, 0};" in src


# ---------------------------------------------------------------------------- ppl-compile


@pytest.mark.parametrize("chip", ["bm1690", "bm1684x"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_ppl_compile_accepts(name: str, chip: str, toolchain: setup.TpuToolchain, tmp_path: Path) -> None:
    src = ppl_of(KERNELS[name]())
    result = ppl_compile(src, chip, toolchain, tmp_path)
    assert result.returncode == 0, f"ppl-compile rc={result.returncode}\n{result.stdout}\n{result.stderr}\n{src}"


def test_tile_too_large_for_local_memory_is_exit_17(toolchain: setup.TpuToolchain, tmp_path: Path) -> None:
    # 64 x 65536 fp32 = 16 MiB in local memory: far beyond 256 KiB per lane.
    src = ppl_of(copy_kernel(64, 65536, 64, 65536))
    result = ppl_compile(src, "bm1690", toolchain, tmp_path)
    assert result.returncode == 17, result.stdout + result.stderr


# ---------------------------------------------------------------------------- errors


def _scalar_store(M: int = 64, N: int = 64) -> Any:
    @T.prim_func
    def scalar_store(A: T.Tensor((M, N), "int64"), B: T.Tensor((M, N), "int64")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_shared((M, N), "int64")
            T.copy(A, a)
            for i in T.serial(M):
                a[i, 0] = 1
            T.copy(a, B)

    return scalar_store


def _global_read_in_parallel(M: int = 64, N: int = 64) -> Any:
    @T.prim_func
    def global_read(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _:
            b = T.alloc_fragment((M, N), "float32")
            for i, j in T.Parallel(M, N):
                b[i, j] = A[i, j] + 1.0
            T.copy(b, B)

    return global_read


def _stale_temporary(M: int = 64, N: int = 64) -> Any:
    @T.prim_func
    def stale_temporary(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _:
            a = T.alloc_fragment((M, N), "float32")
            b = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(M, N):
                t = a[i, j] * 2.0
                a[i, j] = 0.0
                b[i, j] = t  # t is the old a; recomputing it here would read the new one
            T.copy(b, B)

    return stale_temporary


def _oversized_region(M: int = 130, BM: int = 64) -> Any:
    @T.prim_func
    def bad_copy(X: T.Tensor((M, 1), "float32"), Y: T.Tensor((M, 1), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=1) as bx:
            y = T.alloc_fragment((BM,), "float32")
            T.copy(X[bx * BM, 0], y)  # a [1, 64] region of a [130, 1] tensor
            T.copy(y, Y[bx * BM, 0])

    return bad_copy


@pytest.mark.parametrize(
    ("factory", "construct", "where"),
    [
        (_scalar_store, "per-element access to the int64 element a[i, 0] outside T.Parallel", "a[i, 0] = T.int64(1)"),
        (_oversized_region, "T.copy region of extent 64 along dimension 1 of X", "T.copy("),
    ],
)
def test_unsupported_construct_is_named(factory: Callable[[], Any], construct: str, where: str) -> None:
    with pytest.raises(codegen.TpuCodegenError) as info:
        ppl_of(factory())
    message = str(info.value)
    assert construct in message
    assert where in message  # the offending TIR statement
    assert "tilelang-tpu" in message and "target tpu" in message
    assert isinstance(info.value, ValueError)


def test_tilelang_compile_reports_the_codegen_error(toolchain: setup.TpuToolchain) -> None:
    with pytest.raises(codegen.TpuCodegenError, match=r"per-element access to the int64 element a\[i, 0\]"):
        tilelang.compile(_scalar_store(), target="tpu", out_idx=[-1])


def test_registered_as_tvm_build_function() -> None:
    import tvm_ffi

    device, tvm_target = device_module(axpy_kernel(130, 300, 64, 128), "tpu:bm1684x")
    source = tvm_ffi.get_global_func(codegen.BUILD_FUNCTION)(device, tvm_target).inspect_source()
    assert "__KERNEL__ void axpy_kernel(" in source and "for chip bm1684x" in source


def test_doc_construct_table_is_generated_from_the_code() -> None:
    """docs/backends/tpu-codegen.md's construct table is codegen.doc_table.markdown_table()
    (regenerate with ``python -m tilelang_tpu.codegen.doc_table``)."""
    from tilelang_tpu.codegen import doc_table

    page = Path(__file__).resolve().parents[3] / "docs" / "backends" / "tpu-codegen.md"
    if not page.is_file():  # the sdist ships no docs/; `tilelang-tpu constructs` prints the table there
        pytest.skip(f"{page} is in the repository only")
    doc = page.read_text()
    section = doc.split(doc_table.DOC_START + "\n", 1)[1].split(doc_table.DOC_END, 1)[0]
    assert section == doc_table.markdown_table()


def test_every_tile_op_in_the_table_has_its_handler() -> None:
    from tilelang_tpu.codegen import table

    handlers = table.tile_op_handlers()
    assert sorted(handlers) == [
        "tl.tileop.atomicadd",
        "tl.tileop.atomicmax",
        "tl.tileop.atomicmin",
        "tl.tileop.copy",
        "tl.tileop.cummax",
        "tl.tileop.cumsum",
        "tl.tileop.fill",
        "tl.tileop.gemm",
        "tl.tileop.im2col",
        "tl.tileop.reduce",
        "tl.tileop.transpose",
    ]
    assert all(callable(h) for h in handlers.values())
