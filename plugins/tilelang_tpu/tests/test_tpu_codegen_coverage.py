"""Constructs beyond the basic tile ops, run on the BM1690 emulator against torch:
scalar kernel parameters, ... (issue 10, "accept what users write").

Every kernel is written the way TileLang users write them (unsorted and unused
parameters, shapes that do not divide the tile) and every run checks that the
inputs are left untouched.  Each kernel is compiled once per module and reused.
"""

import ctypes
from functools import cache
from typing import Any

import pytest
import tilelang
import tilelang.language as T
import torch
from tilelang_tpu import abi, codegen, lowering

from tilecore import KernelArgumentError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _device_module(func: Any, target: str = "tpu") -> tuple[Any, Any]:
    from tilelang.backend.target import determine_target
    from tvm import IRModule
    from tvm.ir import CallingConv

    tvm_target = determine_target(target, return_object=True)
    lowered = lowering.lower(IRModule({func.attrs["global_symbol"]: func}), tvm_target)
    kernels = {g: f for g, f in lowered.functions.items() if f.attrs is not None and f.attrs.get("calling_conv") == CallingConv.DEVICE_KERNEL_LAUNCH}
    return IRModule(kernels), tvm_target


def _untouched(inputs: list[torch.Tensor], copies: list[torch.Tensor]) -> None:
    for x, x0 in zip(inputs, copies, strict=True):
        assert torch.equal(x, x0), "the kernel modified an input"


# ---------------------------------------------------------------------------- scalar parameters


def _scale_mask(M: int, N: int, BM: int, BN: int, dtype: str, scalar: Any = T.float32) -> Any:
    @T.prim_func
    def scale_mask(X: T.Tensor((M, N), dtype), alpha: scalar, unused: T.int32, n_valid: T.int32, Out: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            x = T.alloc_shared((BM, BN), dtype)
            y = T.alloc_fragment((BM, BN), dtype)
            T.copy(X[by * BM, bx * BN], x)
            for i, j in T.Parallel(BM, BN):
                y[i, j] = T.if_then_else(bx * BN + j < n_valid, x[i, j] * alpha + n_valid, x[i, j])
            T.copy(y, Out[by * BM, bx * BN])

    return scale_mask


@cache
def _scale_mask_kernel(dtype: str) -> Any:
    return tilelang.compile(_scale_mask(100, 200, 64, 128, dtype), target="tpu", out_idx=[-1])


@pytest.mark.usefixtures("toolchain")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scalar_parameters_float_and_int(dtype: str) -> None:
    kernel = _scale_mask_kernel(dtype)
    assert "float arg_1, int arg_2, int arg_3" in kernel.get_kernel_source()
    x = torch.randn(100, 200).to(DTYPES[dtype])
    x0 = x.clone()
    for alpha, n_valid in [(1.5, 7), (-0.25, 150), (3.0, 0)]:
        out = kernel(x, alpha, 99, n_valid)
        ref = x.float().clone()
        ref[:, :n_valid] = ref[:, :n_valid] * alpha + n_valid
        torch.testing.assert_close(out, ref.to(x.dtype), rtol=1e-3 if dtype == "float16" else 1e-6, atol=1e-3 if dtype == "float16" else 1e-5)
        _untouched([x], [x0])
    with pytest.raises(KernelArgumentError, match="integer scalar"):
        kernel(x, 1.0, 0, 2.5)


def test_scalar_parameter_of_other_type_is_refused() -> None:
    device, target = _device_module(_scale_mask(64, 64, 64, 64, "float32", scalar=T.float16))
    with pytest.raises(codegen.TpuCodegenError, match=r"alpha has type float16.*T\.float32, T\.int32"):
        codegen.generate(device, target, "bm1690")


def test_scalar_parameters_refused_on_bm1684x() -> None:
    device, target = _device_module(_scale_mask(64, 64, 64, 64, "float32"), "tpu:bm1684x")
    with pytest.raises(codegen.TpuCodegenError, match="scalar kernel parameters on bm1684x"):
        codegen.generate(device, target, "bm1684x")


def test_entry_arguments_use_c_layout() -> None:
    """ppl-compile's struct for (fp32 *, float, int, fp32 *): natural C alignment."""
    types = abi.slot_ctypes([(torch.float32, False), (torch.float32, True), (torch.int32, True), (torch.float16, False)])
    args = abi.entry_arguments([0x1000, 2.5, -3, 0x2000], types)
    assert ctypes.sizeof(args) == 24
    assert [getattr(type(args), f).offset for f in ("a0", "a1", "a2", "a3")] == [0, 8, 12, 16]
    assert (args.a0, args.a1, args.a2, args.a3) == (0x1000, 2.5, -3, 0x2000)
    with pytest.raises(TypeError, match="float32 or int32"):
        abi.slot_ctypes([(torch.float64, True)])
