"""The ``hip`` target: resolution forms, the TVM target upstream gets, detection and availability."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang_hip import target as hip_target

import tilecore
from tilecore import TargetOptionError
from tilecore._bridge import resolve_tvm, tvm_config


def resolve(spec: object) -> tilecore.ResolvedTarget:
    resolved = tilecore.resolve_target(spec)
    assert resolved is not None
    return resolved


def test_entry_point_is_installed() -> None:
    registry = tilecore.activate()
    backend = next(b for b in registry.backends() if b.name == "hip")
    assert (backend.distribution, backend.value) == ("tilelang-hip", "tilelang_hip.plugin")


@pytest.mark.parametrize(
    "spec",
    ["hip:gfx942", "hip:arch=gfx942", "rocm:gfx942", {"kind": "hip", "arch": "gfx942"}, {"kind": "rocm", "arch": "gfx942"}],
)
def test_resolution_forms(spec: object) -> None:
    resolved = resolve(spec)
    assert resolved.name == "hip" and dict(resolved.options) == {"arch": "gfx942"}
    assert resolved.owner.startswith("tilelang-hip ") and resolved.device == "cuda"


@pytest.mark.parametrize("arch", list(hip_target.KNOWN_ARCHS))
def test_tvm_target_is_the_one_upstream_builds(arch: str) -> None:
    """Our config, after tilelang's own target normalisation, equals upstream's for {"kind": "hip", "mcpu": arch}."""
    from tilelang.backend.target import determine_target
    from tilelang.rocm.target import normalize_rocm_target
    from tvm.target import Target

    upstream = normalize_rocm_target({"kind": "hip", "mcpu": arch})
    ours = Target(tvm_config(resolve(f"hip:{arch}")))
    assert dict(ours.export()) == dict(upstream.export())
    via_tilelang = determine_target(f"hip:{arch}", return_object=True)
    assert str(via_tilelang) == str(upstream)
    # ...and upstream's own TVM-style input maps back to the same resolved target.
    assert resolve_tvm(tilecore.get_registry(), determine_target({"kind": "hip", "mcpu": arch}, return_object=True)) == resolve(
        f"hip:{arch}"
    )


def test_feature_flags_in_mcpu_map_back_to_the_arch() -> None:
    from tvm.target import Target

    tvm = Target({"kind": "hip", "mcpu": "gfx90a:sramecc+:xnack-"})
    assert resolve_tvm(tilecore.get_registry(), tvm) == resolve("hip:gfx90a")


@pytest.mark.parametrize("spec", ["hip:gfx1030", {"kind": "hip", "arch": "sm_90"}, "hip:arch=gfx9000"])
def test_unknown_arch_is_refused_with_the_choices(spec: object) -> None:
    with pytest.raises(TargetOptionError) as info:
        resolve(spec)
    text = str(info.value)
    assert "tilelang-hip" in text and "arch=" in text
    for arch in ("gfx90a", "gfx942", "gfx1100"):
        assert arch in text


def test_unknown_arch_error_reaches_tilelang_compile(add_kernel: object) -> None:
    import tilelang

    with pytest.raises(TargetOptionError, match=r"Valid arch values: .*gfx942"):
        tilelang.compile(add_kernel, target="hip:gfx1030")


def test_detection_failure_names_what_was_tried_and_the_fix() -> None:
    found = hip_target.detect_arch()
    if found.arch is not None:
        pytest.skip(f"an AMD GPU was detected here ({found.arch} via {found.source})")
    with pytest.raises(TargetOptionError) as info:
        resolve("hip")
    text = str(info.value)
    assert "could not detect" in text and "target='hip:gfx942'" in text and "tilelang-hip" in text
    for tried in found.tried:
        assert tried in text


# rocminfo's layout (ROCm 5.x/6.x): CPU agents carry a marketing name under "Name:", GPU agents their gfx
# architecture, and each agent's ISA section repeats it as "amdgcn-amd-amdhsa--gfx...".
ROCMINFO_SAMPLE = textwrap.dedent(
    """\
    ROCk module is loaded
    ==========
    HSA Agents
    ==========
    *******
    Agent 1
    *******
      Name:                    AMD Instinct MI300A Accelerator
      Uuid:                    CPU-XX
      Marketing Name:          AMD Instinct MI300A Accelerator
      Device Type:             CPU
    *******
    Agent 2
    *******
      Name:                    gfx942
      Uuid:                    GPU-8a7f5c1e6b2d4e3f
      Marketing Name:          AMD Instinct MI300A
      Vendor Name:             AMD
      Device Type:             GPU
      ISA Info:
        ISA 1
          Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
    """
)


def test_rocminfo_parser_skips_cpu_agents_and_isa_lines() -> None:
    assert hip_target.parse_rocminfo(ROCMINFO_SAMPLE) == "gfx942"
    assert hip_target.parse_rocminfo("ROCk module is NOT loaded, possibly no GPU devices\n") is None


def test_probe_gives_a_reason_here() -> None:
    """The probe never raises; on this machine's torch build it says why (or that) hip is usable."""
    import torch

    availability = hip_target.probe()
    assert availability.reason
    if getattr(torch.version, "hip", None) is None:
        assert not availability.ok
        build = "CPU-only build" if getattr(torch.version, "cuda", None) is None else "CUDA build for NVIDIA GPUs"
        assert build in availability.reason and "ROCm build of torch" in availability.reason


def test_rocm_alias_resolves_in_a_fresh_process(tmp_path: Path) -> None:
    """'rocm' is also a TVM kind; naming it first must still load tilelang-hip, not fall to TVM's rocm target."""
    script = tmp_path / "alias.py"
    script.write_text(
        "from tilelang.backend.target import determine_target\n"
        "print('TARGET', determine_target('rocm:gfx90a', return_object=True).export()['kind'],"
        " determine_target('rocm:gfx90a', return_object=True).export()['mcpu'])\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "TARGET hip gfx90a" in result.stdout
