"""Target declaration, mode selection, tensor supply (SophGo vs Google torch_tpu), profiling policy, plugin shape."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tilelang_tpu import devices, profiling, target

import tilecore
from tilecore import TargetOptionError, TensorParam, ToolchainError


def test_target_forms_resolve_with_chip_and_mode() -> None:
    default = tilecore.resolve_target("tpu")
    assert dict(default.options) == {"chip": "bm1690", "mode": target.default_mode(), "cores": target.DEFAULT_CORES}
    assert tilecore.resolve_target("tpu:bm1684x")["chip"] == "bm1684x"
    assert tilecore.resolve_target("sophgo:bm1684x")["chip"] == "bm1684x"
    explicit = tilecore.resolve_target({"kind": "tpu", "chip": "bm1684x", "mode": "cmodel"})
    assert str(explicit) == "tpu:chip=bm1684x,mode=cmodel,cores=max" and explicit.device == "cpu"
    assert explicit.distribution == "tilelang-tpu"


def test_unknown_chip_lists_the_choices() -> None:
    with pytest.raises(TargetOptionError, match=r"does not accept chip='bm1688'.*Valid chip values: bm1684x, bm1690"):
        tilecore.resolve_target("tpu:bm1688")


def test_mode_is_cmodel_without_a_card_and_env_and_option_override(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, library = target.card_runtime()
    if not (nodes and library):
        assert target.default_mode() == "cmodel"
    monkeypatch.setenv(target.MODE_ENV, "pcie")
    pcie = tilecore.resolve_target("tpu")
    assert pcie["mode"] == "pcie" and pcie.device == "tpu:0"
    assert tilecore.resolve_target("tpu:mode=cmodel")["mode"] == "cmodel"  # the option beats the variable
    monkeypatch.setenv(target.MODE_ENV, "fpga")
    with pytest.raises(TargetOptionError, match=r"TILELANG_TPU_MODE='fpga' is not a valid mode. Valid modes: pcie, cmodel"):
        tilecore.resolve_target("tpu")


def test_the_card_probe_runs_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolving ``tpu`` chooses the mode default several times per compile, cache hits included:
    the card probe (find_library: ldconfig/gcc/ld subprocesses) must not run again after the first."""
    tilecore.resolve_target("tpu")
    spawned: list[object] = []
    real_init = subprocess.Popen.__init__

    def recording_init(self: subprocess.Popen[bytes], args: object, *rest: object, **kw: object) -> None:
        spawned.append(args)
        real_init(self, args, *rest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess.Popen, "__init__", recording_init)
    for form in ("tpu", "tpu:bm1690", {"kind": "tpu", "cores": "2"}):
        assert tilecore.resolve_target(form)["mode"] in target.MODES
    assert spawned == []
    assert target.card_runtime() is target.card_runtime()
    monkeypatch.setenv(target.MODE_ENV, "pcie")  # the variable is still read on every resolution
    assert tilecore.resolve_target("tpu")["mode"] == "pcie"


def test_probe_explains_pcie_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(target.MODE_ENV, "pcie")
    availability = target.probe()
    assert not availability and "RISC-V toolchain" in availability.reason and "mode=cmodel" in availability.reason


def _fake_torch_tpu(site: Path, dist: str, metadata: str) -> None:
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"  # as pip names it
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n{metadata}")
    (info / "top_level.txt").write_text("torch_tpu\n")
    (info / "RECORD").write_text("")


def test_google_torch_tpu_is_never_taken_for_sophgo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch_tpu(tmp_path, "torch_tpu", "Summary: TorchTPU: PyTorch on Cloud TPUs\nAuthor-email: TorchTPU team <torchtpu@google.com>\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [d for d in devices.installed_torch_tpu() if d.distribution == "torch_tpu"]
    assert [d.vendor for d in found] == ["google"]
    with pytest.raises(ToolchainError, match="Google's TorchTPU, not SophGo's") as info:
        devices.require_sophgo_torch_tpu()
    assert "pip uninstall torch_tpu" in str(info.value)
    assert "torch_tpu" not in sys.modules  # identified from metadata, never imported


def test_sophgo_torch_tpu_is_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch_tpu(tmp_path, "torch-tpu", "Author: SOPHGO\nHome-page: https://github.com/sophgo/torch-tpu\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert devices.require_sophgo_torch_tpu().vendor == "sophgo"


def test_missing_torch_tpu_in_pcie_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    if devices.installed_torch_tpu():
        pytest.skip("a torch_tpu distribution is installed here")
    with pytest.raises(ToolchainError, match="SophGo's torch_tpu, which is not installed"):
        devices.supply(TensorParam("x", torch.float32, (4,)), "normal", "pcie")


def test_cmodel_supply_is_host_memory() -> None:
    tensor = devices.supply(TensorParam("x", torch.float16, (3, 5)), "uniform", "cmodel")
    assert tensor.device.type == "cpu" and tensor.dtype == torch.float16 and tensor.shape == (3, 5)


def test_emulator_bench_is_capped_and_says_so(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(profiling, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="tilelang_tpu"):
        samples = profiling.bench(lambda: calls.append(1), "cmodel", warmup=1e9, rep=1e9, n_warmup=0, n_repeat=0)
        profiling.bench(lambda: None, "cmodel", warmup=25, rep=100, n_warmup=0, n_repeat=500)
    assert len(samples) == profiling.MAX_EMULATOR_REPEAT
    assert len(calls) == 1 + profiling.MAX_EMULATOR_WARMUP + profiling.MAX_EMULATOR_REPEAT  # estimate + warm-up + timed
    assert profiling.emulator_counts(0, 3) == (1, 3)
    warnings = [r for r in caplog.records if "emulator wall time" in r.getMessage()]
    assert len(warnings) == 1  # logged once per process


def test_plugin_import_is_cheap_and_complete() -> None:
    code = (
        "import sys, tilelang_tpu.plugin as p; "
        "heavy = [m for m in ('tilelang_tpu.runtime', 'tilelang_tpu.tpuv7', 'tilelang_tpu.setup', 'tilelang_tpu.codegen') if m in sys.modules]; "
        "hooks = sorted(n for n in dir(p) if n.startswith('tilecore_') and callable(getattr(p, n))); "
        "print(heavy, p.tilecore_api_version, hooks)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == (
        "[] 1.0 ['tilecore_bench', 'tilecore_codegen', 'tilecore_create_adapter', 'tilecore_declare_targets', "
        "'tilecore_lower', 'tilecore_setup', 'tilecore_supply_tensor']"
    )
