"""Where ``hip`` tensors go: only onto an AMD GPU of a ROCm torch build, never another vendor's device.

The first tests run on whatever torch is installed (CI: a CPU build).  The
``gpu`` test runs on an NVIDIA machine with a CUDA build of torch, where the
``cuda:0`` device exists but is the wrong vendor.  The ``rocm`` tests need an
AMD GPU and are skipped without one.  None of them imports tilelang at module
level, so the NVIDIA test also runs where only torch, pluggy and tilecore are
installed.
"""

from __future__ import annotations

import math

import pytest
import torch
from tilelang_hip import __version__, profiling, runtime
from tilelang_hip import target as hip_target

import tilecore
from tilecore import TensorParam
from tilecore.kit.timing import event_bench

PARAM = TensorParam("A", torch.float16, (64, 32))


def hip(arch: str = "gfx942") -> tilecore.ResolvedTarget:
    return tilecore.ResolvedTarget(hip_target.TARGET, {"arch": arch}, "hip", "tilelang-hip", __version__)


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (runtime.TorchBuild("2.13.0+cu128", None, "12.8"), "CUDA build for NVIDIA GPUs, CUDA 12.8"),
        (runtime.TorchBuild("2.13.0+cpu", None, None), "CPU-only build"),
    ],
)
def test_non_rocm_builds_are_refused_with_the_fix(build: runtime.TorchBuild, expected: str) -> None:
    reason = runtime.wrong_build_reason(build, "target hip:arch=gfx942 (tilelang-hip 0.1.0)")
    assert reason is not None and expected in reason
    assert "ROCm build of torch" in reason and "tilelang-hip" in reason
    if build.kind == "cuda":
        assert "NVIDIA" in reason and "target='cuda'" in reason


def test_rocm_build_is_accepted() -> None:
    assert runtime.wrong_build_reason(runtime.TorchBuild("2.9.0+rocm6.4", "6.4.43482", None), "x") is None
    assert runtime.TorchBuild("2.9.0+rocm6.4", "6.4.43482", None).kind == "rocm"


@pytest.mark.parametrize(
    ("name", "arch"),
    [("gfx90a:sramecc+:xnack-", "gfx90a"), ("gfx942", "gfx942"), ("GFX1100", "gfx1100"), ("", None), (None, None), ("sm_90", None)],
)
def test_arch_names_are_normalized(name: object, arch: str | None) -> None:
    assert runtime.normalize_arch(name) == arch


def test_supply_and_bench_refuse_this_torch_unless_it_is_rocm() -> None:
    """Through tilecore's hook dispatch, as the profiler calls them, with the torch installed here."""
    if runtime.torch_build().kind == "rocm":
        pytest.skip("a ROCm build of torch is installed; the rocm tests cover it")
    registry = tilecore.get_registry()
    target = tilecore.resolve_target("hip:gfx942")
    assert target is not None
    with pytest.raises(runtime.RocmDeviceError, match="ROCm build of torch") as info:
        registry.call(target, "tilecore_supply_tensor", param=PARAM, supply="normal")
    assert "target hip:arch=gfx942 (tilelang-hip" in str(info.value)
    with pytest.raises(runtime.RocmDeviceError, match="ROCm build of torch"):
        registry.call(target, "tilecore_bench", fn=lambda: None, warmup=1.0, rep=1.0, n_warmup=0, n_repeat=0, backend="event")


def test_flush_covers_the_infinity_cache() -> None:
    assert profiling.flush_bytes("gfx942") == profiling.flush_bytes("gfx950") == 512 * profiling.MIB
    assert profiling.flush_bytes("gfx90a") == profiling.flush_bytes("gfx1100") == 256 * profiling.MIB


# -- NVIDIA machine: the device named "cuda" is the wrong vendor -----------------------------------


@pytest.mark.gpu
def test_cuda_torch_on_an_nvidia_gpu_is_refused(nvidia_device: torch.device) -> None:
    before = torch.cuda.memory_allocated(nvidia_device)
    with pytest.raises(runtime.RocmDeviceError) as info:
        runtime.require_device(hip())
    text = str(info.value)
    assert f"torch {torch.__version__} (CUDA build for NVIDIA GPUs" in text and "refuses" in text and "target='cuda'" in text
    assert torch.cuda.memory_allocated(nvidia_device) == before, "nothing may be allocated on the NVIDIA GPU"


@pytest.mark.gpu
def test_event_timing_loop_on_torch_cuda_api(nvidia_device: torch.device) -> None:
    """The HIP-event loop (tilecore.kit.timing.event_bench) is torch.cuda's Event API; on an NVIDIA GPU it runs
    as is (vendor checks are bench's job)."""
    a = torch.randn(2048, 2048, device=nvidia_device, dtype=torch.float16)
    samples = event_bench(lambda: a @ a, nvidia_device, n_warmup=3, n_repeat=20, flush_bytes=64 * profiling.MIB)
    assert len(samples) == 20 and all(math.isfinite(s) and s > 0 for s in samples)
    budgeted = event_bench(lambda: a @ a, nvidia_device, warmup=5.0, rep=20.0, flush_bytes=64 * profiling.MIB)
    assert 1 <= len(budgeted) <= 10_000  # event_bench's max_repeat


# -- AMD machine --------------------------------------------------------------------------------


@pytest.mark.rocm
def test_supply_on_the_rocm_device(rocm_device: torch.device) -> None:
    arch = runtime.device_arch(rocm_device.index)
    target = tilecore.resolve_target(f"hip:{arch}")
    assert target is not None
    assert runtime.require_device(target) == rocm_device
    registry = tilecore.get_registry()
    for supply in tilecore.SUPPLY_TYPES:
        tensor = registry.call(target, "tilecore_supply_tensor", param=PARAM, supply=supply)
        assert tensor.device == rocm_device and tensor.dtype == torch.float16 and tuple(tensor.shape) == (64, 32)


@pytest.mark.rocm
def test_other_arch_is_refused_on_the_rocm_device(rocm_device: torch.device) -> None:
    arch = runtime.device_arch(rocm_device.index)
    other = next(a for a in hip_target.KNOWN_ARCHS if a != arch)
    with pytest.raises(runtime.RocmDeviceError, match=f"is {arch}, but the kernel is compiled for {other}"):
        runtime.require_device(hip(other))


@pytest.mark.rocm
def test_hip_event_bench(rocm_device: torch.device) -> None:
    arch = runtime.device_arch(rocm_device.index)
    a = torch.randn(2048, 2048, device=rocm_device, dtype=torch.float16)
    samples = profiling.bench(hip(str(arch)), lambda: a @ a, warmup=5.0, rep=20.0, n_warmup=0, n_repeat=10)
    assert len(samples) == 10 and all(math.isfinite(s) and s > 0 for s in samples)


@pytest.mark.parametrize("backend", ["cudagraph", "wall", "cupti"])
def test_hip_bench_refuses_timing_methods_it_does_not_have(backend: str) -> None:
    """do_bench(backend=...) is honoured or refused by name (it used to be ignored), before any device work."""
    with pytest.raises(
        tilecore.TilecoreError,
        match=rf"target hip:arch=gfx942 \(tilelang-hip {__version__}\): do_bench\(backend='{backend}'\) is not a timing method of this backend\. Valid: event",
    ):
        profiling.bench(hip(), lambda: None, warmup=5.0, rep=20.0, n_warmup=0, n_repeat=1, backend=backend)
