"""Target parsing, arch detection, availability, setup and the plugin's errors (no GPU needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
import tilelang
from tilelang.backend.target import determine_target
from tilelang.contrib import nvcc
from tilelang_cuda import __version__, profiling, setup
from tilelang_cuda.target import ARCH_EXAMPLES, arch_for_capability, gpu_problem
from tvm.target import Target

import tilecore
from tilecore import Owner, TargetOptionError, TilecoreError, ToolchainError
from tilecore._registry import probe
from tilecore.kernel import TensorParam
from tilecore.kit.timing import timing_method

GPU_PROBLEM = gpu_problem()
needs_nvcc = pytest.mark.skipif(setup.locate_nvcc() is None, reason="needs nvcc (CUDA toolkit)")
without_gpu = pytest.mark.skipif(GPU_PROBLEM is None, reason="checks the behaviour without a GPU")


@pytest.mark.parametrize(
    "spelling", ["cuda:sm_90a", "cuda:arch=sm_90a", {"kind": "cuda", "arch": "sm_90a"}, {"kind": "CUDA", "arch": "sm_90a"}]
)
def test_cuda_target_forms_resolve_to_the_plugin(spelling: object) -> None:
    resolved = tilecore.resolve_target(spelling)
    assert resolved is not None
    assert (resolved.name, dict(resolved.options), resolved.distribution) == ("cuda", {"arch": "sm_90a"}, "tilelang-cuda")
    assert resolved.spec.upstream is not None and resolved.spec.upstream.kind == "cuda"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_cuda_tvm_target_is_exactly_upstreams(arch: str) -> None:
    """tilelang's own target resolution, with tilecore active, gives the TVM target upstream builds for the arch."""
    ours = determine_target(f"cuda:{arch}", return_object=True)
    upstream = Target({"kind": "cuda", "arch": arch})
    assert str(ours) == str(upstream)
    assert str(determine_target({"kind": "cuda", "arch": arch}, return_object=True)) == str(upstream)


def test_cuda_dict_target_passes_extra_tvm_attributes() -> None:
    target = determine_target({"kind": "cuda", "arch": "sm_90a", "max_num_threads": 512}, return_object=True)
    assert target.kind.name == "cuda" and str(target.attrs["arch"]) == "sm_90a" and int(target.attrs["max_num_threads"]) == 512


@pytest.mark.parametrize("bad", ["cuda:sm90", "cuda:compute_90a", "cuda:arch=90a", {"kind": "cuda", "arch": "sm_90x"}])
def test_cuda_bad_arch_lists_valid_forms(bad: object) -> None:
    with pytest.raises(TargetOptionError) as info:
        determine_target(bad, return_object=True)
    text = str(info.value)
    assert f"tilelang-cuda {__version__}" in text and "target 'cuda'" in text
    assert all(example in text for example in ARCH_EXAMPLES), text
    assert "sm_\\d{2,3}[af]?" in text


def test_cuda_arch_rule_matches_upstream() -> None:
    """The default arch is spelled the way upstream spells a detected GPU (``a`` from 9.0 on)."""
    for major, minor in [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0)]:
        assert arch_for_capability(major, minor) == f"sm_{nvcc.get_target_arch((major, minor))}"
    assert arch_for_capability(9, 0) == "sm_90a" and arch_for_capability(8, 0) == "sm_80"


@without_gpu
def test_cuda_without_gpu_needs_an_explicit_arch() -> None:
    with pytest.raises(TargetOptionError) as info:
        tilecore.resolve_target("cuda")
    text = str(info.value)
    assert GPU_PROBLEM is not None and GPU_PROBLEM in text
    assert "target='cuda:sm_90a'" in text and f"tilelang-cuda {__version__}" in text
    availability = probe(tilecore.resolve_target("cuda:sm_90a").spec)
    assert not availability and GPU_PROBLEM in availability.reason and "compile-only" in availability.reason


@without_gpu
def test_cuda_without_gpu_compile_with_bare_target_explains(lib) -> None:
    """The user path: tilelang.compile(target="cuda") without a GPU names the fix instead of compiling for sm_50."""
    with pytest.raises(TargetOptionError, match=re.escape("target='cuda:sm_90a'")):
        tilelang.compile(lib.add(1024), target="cuda")


@without_gpu
def test_cuda_without_gpu_supply_and_bench_refuse() -> None:
    registry = tilecore.get_registry()
    resolved = tilecore.resolve_target("cuda:sm_90a")
    param = TensorParam("A", __import__("torch").float16, (4, 4))
    with pytest.raises(TilecoreError, match="cannot make input tensors") as info:
        registry.call(resolved, "tilecore_supply_tensor", param=param, supply="normal")
    assert GPU_PROBLEM is not None and GPU_PROBLEM in str(info.value)
    with pytest.raises(TilecoreError, match="cannot time kernels"):
        registry.call(resolved, "tilecore_bench", fn=lambda: None, warmup=1.0, rep=1.0, n_warmup=0, n_repeat=0, backend="event")


@needs_nvcc
def test_cuda_setup_reports_nvcc() -> None:
    toolchain = tilecore.setup_target("cuda:sm_90a")
    assert toolchain is not None and toolchain.name == "nvcc"
    assert os.access(toolchain.location, os.X_OK)
    banner = subprocess.run([toolchain.location, "--version"], capture_output=True, text=True, check=True).stdout
    assert re.match(r"\d+\.\d+\.\d+$", toolchain.version) and f"V{toolchain.version}" in banner
    assert toolchain.fingerprint == f"nvcc=={toolchain.version}"
    backends = setup.execution_backends("sm_90a")
    assert [b.name for b in backends if b.default] == ["tvm_ffi"]
    assert any(note.startswith("execution backends: tvm_ffi (default") for note in toolchain.notes)


@needs_nvcc
def test_cuda_setup_explains_a_wrong_cuda_home(tmp_path) -> None:
    """CUDA_HOME pointing at a folder without nvcc: upstream would fail in nvcc; setup says why and how to fix it."""
    code = textwrap.dedent(
        """
        import tilelang, tilecore
        try:
            tilecore.setup_target("cuda:sm_90a")
        except tilecore.ToolchainError as err:
            print("ERROR", err)
        """
    )
    env = {**os.environ, "CUDA_HOME": str(tmp_path), "CUDA_PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path).stdout
    assert "ERROR" in out, out
    assert f"CUDA_HOME={tmp_path}, which has no bin/nvcc" in out and f"tilelang-cuda {__version__}" in out and "Set CUDA_HOME=" in out


def test_cuda_setup_error_type_is_toolchain_error() -> None:
    with pytest.raises(ToolchainError, match="printed no version"):
        setup.nvcc_version(__import__("pathlib").Path("/bin/true"), Owner("tilelang-cuda", "0.1.0", target="cuda"))


def test_cuda_plain_sm90_note() -> None:
    assert setup.variant_note("sm_90a") is None and setup.variant_note("sm_80") is None
    assert setup.variant_note("sm_100f") is None
    note = setup.variant_note("sm_90")
    assert note is not None and "sm_90a" in note


@needs_nvcc
def test_cuda_setup_warns_about_plain_sm90() -> None:
    with pytest.warns(UserWarning, match=rf"target cuda:arch=sm_90 \(tilelang-cuda {re.escape(__version__)}\): .*use arch=sm_90a"):
        toolchain = tilecore.setup_target("cuda:sm_90")
    assert any("sm_90a" in note for note in toolchain.notes)


def test_cuda_bench_method_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """do_bench(backend=...) and TILELANG_CUDA_BENCH are checked before any GPU work, by tilecore's helper."""
    target = tilecore.resolve_target("cuda:sm_90a")
    monkeypatch.setenv(profiling.ENV_METHOD, "cudagraph")
    assert timing_method(target, "event", profiling.METHODS, env_var=profiling.ENV_METHOD) == "cudagraph"
    monkeypatch.setenv(profiling.ENV_METHOD, "wall")
    with pytest.raises(
        tilecore.TilecoreError,
        match=rf"target cuda:arch=sm_90a \(tilelang-cuda {re.escape(__version__)}\): TILELANG_CUDA_BENCH='wall' .*Valid: event, cudagraph",
    ):
        profiling.bench(target, lambda: None, 25, 100, 0, 0, "event")
    monkeypatch.delenv(profiling.ENV_METHOD)
    with pytest.raises(tilecore.TilecoreError, match=r"do_bench\(backend='wall'\) is not a timing method"):
        profiling.bench(target, lambda: None, 25, 100, 0, 0, "wall")
