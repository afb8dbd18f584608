"""Kernels run on an NVIDIA GPU and checked against torch (marked ``gpu``; skipped without a GPU)."""

from __future__ import annotations

import pytest
import tilelang
import torch
from tilelang.contrib import nvcc
from tilelang.profiler import TensorSupplyType
from tilelang_cuda import profiling, setup
from tilelang_cuda.target import gpu_problem

import tilecore
from tilecore import SUPPLY_TYPES
from tilecore._registry import probe
from tilecore.kernel import TensorParam

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(gpu_problem() is not None, reason=f"needs an NVIDIA GPU: {gpu_problem()}")]


def _device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def test_cuda_detects_the_local_gpu_like_upstream() -> None:
    resolved = tilecore.resolve_target("cuda")
    capability = torch.cuda.get_device_capability(torch.cuda.current_device())
    assert resolved.options["arch"] == f"sm_{nvcc.get_target_arch(capability)}"
    availability = probe(resolved.spec)
    assert availability and torch.cuda.get_device_name() in availability.reason


def test_cuda_gemm_matches_torch(lib) -> None:
    """Bare target="cuda": upstream's normaliser builds the Target, and the plugin still owns supply and timing."""
    M, N, K = 512, 384, 256
    kernel = tilelang.compile(lib.gemm(M, N, K), target="cuda", out_idx=[-1])
    assert str(kernel.target.attrs["arch"]) == tilecore.resolve_target("cuda").options["arch"]
    a = torch.randn(M, K, dtype=torch.float16, device=_device())
    b = torch.randn(K, N, dtype=torch.float16, device=_device())
    c = kernel(a, b)
    assert c.device == _device() and c.dtype == torch.float16 and c.shape == (M, N)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
    assert type(kernel.get_profiler()).__name__ == "TilecoreProfiler"


def test_cuda_bf16_gemm_matches_torch(lib) -> None:
    M = N = K = 256
    kernel = tilelang.compile(lib.gemm(M, N, K, dtype="bfloat16"), target="cuda", out_idx=[-1])
    a = torch.randn(M, K, dtype=torch.bfloat16, device=_device())
    b = torch.randn(K, N, dtype=torch.bfloat16, device=_device())
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)


def test_cuda_elementwise_and_out_idx_outputs(lib) -> None:
    M, N = 100, 70  # not multiples of the block: exercises the bounds checks
    kernel = tilelang.compile(lib.axpy_and_diff(M, N), target="cuda", out_idx=[2, 3])
    a = torch.randn(M, N, device=_device())
    b = torch.randn(M, N, device=_device())
    s, d = kernel(a, b)
    for out in (s, d):
        assert out.device == _device() and out.shape == (M, N) and out.dtype == torch.float32
    torch.testing.assert_close(s, 2 * a + b)
    torch.testing.assert_close(d, a - b)
    # Without out_idx the caller passes every tensor and the kernel writes the outputs in place.
    in_place = tilelang.compile(lib.axpy_and_diff(M, N), target="cuda")
    s2, d2 = torch.empty_like(a), torch.empty_like(a)
    in_place(a, b, s2, d2)
    torch.testing.assert_close(s2, 2 * a + b)
    torch.testing.assert_close(d2, a - b)
    single = tilelang.compile(lib.add(1000), target="cuda", out_idx=[-1])
    x, y = torch.randn(1000, device=_device()), torch.randn(1000, device=_device())
    torch.testing.assert_close(single(x, y), x + y)


def test_cuda_supply_every_type_on_the_current_device() -> None:
    registry = tilecore.get_registry()
    resolved = tilecore.resolve_target("cuda")
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int8):
        for supply in SUPPLY_TYPES:
            tensor = registry.call(resolved, "tilecore_supply_tensor", param=TensorParam("x", dtype, (64, 48)), supply=supply)
            assert tensor.device == _device() and tensor.dtype == dtype and tensor.shape == (64, 48), (dtype, supply)
            if supply == "zero":
                assert not tensor.any()
            elif supply == "one":
                assert (tensor == 1).all()
            elif dtype.is_floating_point and supply in ("uniform", "normal", "randn", "auto"):
                assert tensor.float().std() > 0.1, (dtype, supply)


@pytest.mark.parametrize("method", profiling.METHODS)
def test_cuda_profiler_times_and_checks(lib, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(profiling.ENV_METHOD, method)
    M = N = K = 1024
    kernel = tilelang.compile(lib.gemm(M, N, K), target="cuda", out_idx=[-1])
    profiler = kernel.get_profiler(tensor_supply_type=TensorSupplyType.Normal)
    assert type(profiler).__name__ == "TilecoreProfiler"
    profiler.assert_allclose(lambda a, b: (a.float() @ b.float()).half(), atol=1e-1, rtol=1e-2)
    ms = profiler.do_bench(warmup=5, rep=20)
    assert isinstance(ms, float) and 0.0 < ms < 50.0
    low, high = profiler.do_bench(warmup=5, rep=20, quantiles=[0.1, 0.9])
    assert 0.0 < low <= high
    # A kernel 64x the work takes measurably longer: the timer sees the GPU, not just the launch.
    # (8x was not enough on an H200: 1024^3 is about 4 us of math, so both sizes timed the per-launch
    # overhead, 0.06 ms against 0.05 ms while the host's CPUs were busy; 4096^3 is about 0.23 ms.)
    big = tilelang.compile(lib.gemm(4 * M, 4 * N, 4 * K), target="cuda", out_idx=[-1])
    assert big.get_profiler().do_bench(warmup=5, rep=20) > 2 * ms


@pytest.mark.parametrize("backend", ["tvm_ffi", "cython", "nvrtc"])
def test_cuda_every_available_execution_backend(lib, backend: str) -> None:
    """The upstream execution backends setup.execution_backends() reports as available compile and run correctly."""
    arch = tilecore.resolve_target("cuda").options["arch"]
    available = {b.name for b in setup.execution_backends(arch) if b.available}
    if backend not in available:
        pytest.skip(f"upstream execution backend {backend} is not available here ({setup.REQUIREMENTS[backend]})")
    M = N = K = 256
    kernel = tilelang.compile(lib.gemm(M, N, K), target=f"cuda:{arch}", out_idx=[-1], execution_backend=backend)
    assert kernel.execution_backend == backend
    a = torch.randn(M, K, dtype=torch.float16, device=_device())
    b = torch.randn(K, N, dtype=torch.float16, device=_device())
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
    profiler = kernel.get_profiler()
    assert type(profiler).__name__ == "TilecoreProfiler" and profiler.do_bench(warmup=2, rep=10) > 0
