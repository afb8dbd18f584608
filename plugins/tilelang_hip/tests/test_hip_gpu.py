"""End to end on an AMD GPU: unmodified user code, ``target="hip"``, checked against torch.

Needs a ROCm build of torch that sees an AMD GPU and a ROCm >= 6.3
installation; every test is skipped otherwise (no machine here has one, so
these are written for users with an AMD GPU: ``pytest -m rocm plugins/tilelang_hip``).
"""

from typing import Any

import pytest
import torch
from tilelang_hip import runtime

pytestmark = pytest.mark.rocm


@pytest.fixture
def compile_hip(rocm_device: torch.device) -> Any:
    import tilelang
    from tilelang_hip import setup

    from tilecore import ToolchainError

    try:
        setup.find_toolchain()
    except ToolchainError as err:
        pytest.skip(str(err))
    arch = runtime.device_arch(rocm_device.index)

    def build(func: Any, target: str = "hip") -> Any:
        kernel = tilelang.compile(func, target=target, out_idx=[-1])
        assert kernel.target.attrs["mcpu"] == arch
        return kernel

    return build


def test_elementwise_add_matches_torch(compile_hip: Any, add_kernel: Any, rocm_device: torch.device) -> None:
    kernel = compile_hip(add_kernel)
    a = torch.randn(4096, device=rocm_device)
    b = torch.randn(4096, device=rocm_device)
    torch.testing.assert_close(kernel(a, b), a + b)
    assert "__launch_bounds__(256)" in kernel.get_kernel_source()


def test_gemm_matches_torch(compile_hip: Any, gemm_kernel: Any, rocm_device: torch.device) -> None:
    kernel = compile_hip(gemm_kernel)
    torch.manual_seed(0)
    a = torch.randn(512, 512, device=rocm_device, dtype=torch.float16)
    b = torch.randn(512, 512, device=rocm_device, dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-1)


def test_profiler_uses_this_backend(compile_hip: Any, gemm_kernel: Any, rocm_device: torch.device) -> None:
    kernel = compile_hip(gemm_kernel)
    profiler = kernel.get_profiler()
    assert type(profiler).__name__ == "TilecoreProfiler", "tilecore routes supply and timing of 'hip' kernels to tilelang-hip"
    profiler.assert_allclose(lambda a, b: (a.float() @ b.float()).half(), atol=1e-1, rtol=1e-2)
    latency = profiler.do_bench(n_warmup=2, n_repeat=10)
    assert isinstance(latency, float) and latency > 0


def test_dict_target_and_explicit_arch(compile_hip: Any, add_kernel: Any, rocm_device: torch.device) -> None:
    arch = runtime.device_arch(rocm_device.index)
    kernel = compile_hip(add_kernel, target={"kind": "hip", "arch": arch})
    a = torch.randn(4096, device=rocm_device)
    torch.testing.assert_close(kernel(a, a), a * 2)
