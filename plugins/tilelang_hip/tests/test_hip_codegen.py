"""HIP source generation through tilelang with tilecore active (no ROCm, no AMD GPU needed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tilelang_hip import setup
from tilelang_hip.codegen import generate_source

from tilecore import TargetOptionError, ToolchainError

TEMPLATE_INCLUDES = ("#include <hip/hip_runtime.h>", "#include <tl_templates/hip/gemm.h>", "#include <tl_templates/hip/copy.h>")


def lower_source(func: Any, target: str) -> str:
    """``tilelang.lower`` with the user's target string, under the target context it needs."""
    import tilelang
    from tilelang.backend.target import determine_target

    with determine_target(target, return_object=True):
        return str(tilelang.lower(func, target=target).kernel_source)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_elementwise_source(add_kernel: Any, arch: str) -> None:
    source = lower_source(add_kernel, f"hip:{arch}")
    assert source == generate_source(add_kernel, {"kind": "hip", "arch": arch})
    for include in TEMPLATE_INCLUDES:
        assert include in source
    signature = (
        'extern "C" __global__ void __launch_bounds__(256) add_kernel(float* __restrict__ A, float* __restrict__ B, float* __restrict__ C)'
    )
    assert signature in source
    # One thread per element: blockIdx.x * 256 + threadIdx.x indexes all three buffers.
    assert source.count("((((int)blockIdx.x) * 256) + ((int)threadIdx.x))") == 3
    assert "__builtin_amdgcn_mfma" not in source


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_gemm_source_uses_mfma(gemm_kernel: Any, arch: str) -> None:
    source = lower_source(gemm_kernel, f"hip:{arch}")
    signature = 'extern "C" __global__ void __launch_bounds__(256) gemm_kernel(half_t* __restrict__ A, half_t* __restrict__ B, half_t* __restrict__ C)'
    assert signature in source
    # fp16 x fp16 -> fp32 on CDNA matrix cores, 16x16x16 tiles, accumulating into the fragment.
    assert re.search(r"__builtin_amdgcn_mfma_f32_16x16x16f16\(", source)
    assert "float Cl" not in source and "float C_l[16];" in source
    assert "extern __shared__ __align__(1024) uchar buf_dyn_shmem[];" in source


@pytest.mark.parametrize(
    ("arch", "builtin"),
    [("gfx1100", "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32("), ("gfx1201", "__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(")],
)
def test_rdna_gemm_uses_wmma(gemm_kernel: Any, arch: str, builtin: str) -> None:
    source = generate_source(gemm_kernel, f"hip:{arch}")
    assert builtin in source and "__builtin_amdgcn_mfma" not in source


def test_source_is_upstreams_without_tilecore(tmp_path: Path, gemm_kernel: Any) -> None:
    """tilecore + tilelang-hip with "hip:gfx942" generate byte for byte what plain tilelang does for its own dict."""
    script = tmp_path / "upstream_gemm.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import tilelang, tilelang.language as T
            from tvm.target import Target

            sys.path.insert(0, HERE)
            from hip_kernels import make_gemm

            target = {"kind": "hip", "mcpu": "gfx942"}
            from tilelang.backend.target import determine_target
            with tilelang.tvm.transform.PassContext(opt_level=3), determine_target(target, return_object=True):
                source = tilelang.lower(make_gemm(), target=target).kernel_source
            print("REPORT", json.dumps({"tilecore": "tilecore" in sys.modules, "source": source}))
            """
        ).replace("HERE", repr(str(Path(__file__).parent)), 1)
    )
    env = {**__import__("os").environ, "TILECORE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("REPORT "))[len("REPORT ") :])
    assert report["tilecore"] is False
    assert generate_source(gemm_kernel, "hip:gfx942") == report["source"]


def test_generate_source_refuses_other_kinds(add_kernel: Any) -> None:
    with pytest.raises(TargetOptionError, match="resolves to TVM kind 'c'"):
        generate_source(add_kernel, "c")


def test_compile_without_rocm_names_the_fix(add_kernel: Any) -> None:
    import tilelang

    try:
        setup.locate_rocm()
    except ToolchainError:
        pass
    else:
        pytest.skip("a ROCm installation is present here; test_hip_compile covers compiling")
    with pytest.raises(ToolchainError) as info:
        tilelang.compile(add_kernel, target="hip:gfx90a", out_idx=[-1])
    text = str(info.value)
    assert "tilelang-hip" in text and "no ROCm installation found" in text and "ROCM_PATH" in text and "generate_source" in text
