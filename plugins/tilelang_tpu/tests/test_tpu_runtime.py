"""Build and run hand-written PPL kernels (tests/ppl/, written for these tests following
tilelang_tpu/abi.py) on SophGo's emulators, compared with torch on random data."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tilelang_tpu import __version__, emulator, pool, runtime, setup
from tilelang_tpu.target import PCIE_UNSUPPORTED

import tilecore
from tilecore import CompiledKernel, KernelArgumentError, TensorParam, TilecoreError, ToolchainError
from tilecore._launch import Launcher

F32 = torch.float32
F16 = torch.float16


def _kernel(
    name: str, source: str, dtype: torch.dtype, shape: tuple[int, ...], n: int, chip: str = "bm1690", mode: str = "cmodel"
) -> CompiledKernel:
    target = tilecore.resolve_target({"kind": "tpu", "chip": chip, "mode": mode})
    params = tuple(TensorParam(f"arg{i}", dtype, shape) for i in range(n))
    return CompiledKernel(name=name, source=source, params=params, out_idx=(n - 1,), target=target)


def _launcher(kernel: CompiledKernel, toolchain: setup.TpuToolchain) -> Launcher:
    return Launcher(kernel, runtime.create_adapter(kernel, toolchain))


@pytest.fixture
def chip_kernels(ppl: Callable[[str], str]) -> dict[str, Callable[[str], CompiledKernel]]:
    return {
        "add": lambda chip: _kernel("add", ppl("add_f32_1024.pl"), F32, (1024, 1024), 3, chip),
        "copy": lambda chip: _kernel("copy_kernel", ppl("copy_f16_odd.pl"), F16, (100, 300), 2, chip),
        "scale_add": lambda chip: _kernel("main", ppl("scale_add_f16.pl"), F16, (130, 700), 3, chip),
    }


def test_bm1690_add_f32(toolchain: setup.TpuToolchain, chip_kernels: dict) -> None:
    kernel = chip_kernels["add"]("bm1690")
    launch = _launcher(kernel, toolchain)
    assert (launch.adapter.chip, launch.adapter.mode) == ("bm1690", "cmodel")
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    torch.testing.assert_close(launch(a, b), a + b, rtol=0, atol=0)


def test_bm1690_fp16_odd_shapes_and_same_entry_names(toolchain: setup.TpuToolchain, chip_kernels: dict) -> None:
    copy = _launcher(chip_kernels["copy"]("bm1690"), toolchain)
    x = torch.randn(100, 300).to(F16)
    torch.testing.assert_close(copy(x), x, rtol=0, atol=0)
    # Two libraries that both export main_kernel_entry, in one process: each runs its own code.
    scale_add = chip_kernels["scale_add"]("bm1690")
    scale_sub = dataclasses.replace(scale_add, source=scale_add.source.replace("tiu::fadd(lc, lc, la)", "tiu::fsub(lc, lc, la)"))
    run_add, run_sub = _launcher(scale_add, toolchain), _launcher(scale_sub, toolchain)
    a, b = torch.randn(130, 700).to(F16), torch.randn(130, 700).to(F16)
    expected_add = (a * b + a).float()
    expected_sub = (a * b - a).float()
    torch.testing.assert_close(run_add(a, b).float(), expected_add, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(run_sub(a, b).float(), expected_sub, rtol=2e-3, atol=2e-3)


def test_bm1684x_worker_processes(toolchain: setup.TpuToolchain, chip_kernels: dict) -> None:
    if toolchain.missing_libraries("bm1684x"):
        pytest.skip(f"toolchain lacks the BM1684X cmodel: {toolchain.missing_libraries('bm1684x')}")
    copy = _launcher(chip_kernels["copy"]("bm1684x"), toolchain)
    scale_add = _launcher(chip_kernels["scale_add"]("bm1684x"), toolchain)
    assert (copy.adapter.chip, copy.adapter.mode) == ("bm1684x", "cmodel")
    x = torch.randn(100, 300).to(F16)
    a, b = torch.randn(130, 700).to(F16), torch.randn(130, 700).to(F16)
    torch.testing.assert_close(copy(x), x, rtol=0, atol=0)
    torch.testing.assert_close(scale_add(a, b).float(), (a * b + a).float(), rtol=2e-3, atol=2e-3)
    y = torch.randn(100, 300).to(F16)
    torch.testing.assert_close(copy(y), y, rtol=0, atol=0)  # the workers are long-lived: reused with new data
    assert len(runtime.WORKERS) >= 2  # one worker per kernel library
    runtime.close_workers()


def test_the_runs_tests_share_one_kernel_store(shared_kernel_store: Path) -> None:
    """conftest.py: the kernel libraries are the run's store (the rest of the caches stay per test)."""
    from tilelang_tpu.build import STORE

    assert STORE.root.resolve() == shared_kernel_store.resolve()


@pytest.mark.private_kernel_store
def test_a_private_kernel_store_is_the_tests_own(shared_kernel_store: Path, tilecore_isolated_caches: Path) -> None:
    from tilelang_tpu.build import STORE

    assert STORE.root.resolve() != shared_kernel_store.resolve()
    assert tilecore_isolated_caches in STORE.root.resolve().parents


@pytest.mark.private_kernel_store
def test_disk_cache_hit_runs_no_compiler(toolchain: setup.TpuToolchain, ppl: Callable[[str], str]) -> None:
    source = ppl("copy_f16_odd.pl")
    first = runtime.build(source, "copy_kernel", "bm1690", "cmodel", toolchain)
    assert not first.cached and first.library.is_file()
    runs = runtime.ppl_compile_runs
    # A toolchain whose compiler does not exist: any compile attempt would fail.
    gone = dataclasses.replace(toolchain, ppl_compile=Path("/nonexistent/ppl-compile"))
    second = runtime.build(source, "copy_kernel", "bm1690", "cmodel", gone)
    assert second.cached and second.library == first.library and runtime.ppl_compile_runs == runs
    other_chip = runtime.build(source, "copy_kernel", "bm1684x", "cmodel", toolchain)
    assert not other_chip.cached and other_chip.library != first.library  # chip is part of the key
    assert str(first.library).startswith(os.environ["TILECORE_CACHE_DIR"])
    manifest = json.loads((first.library.parent / "build.json").read_text())
    assert manifest["entry"] == "copy_kernel_entry" and manifest["toolchain"] == toolchain.version


def test_ppl_compile_error_keeps_the_source(toolchain: setup.TpuToolchain) -> None:
    source = '#include "ppl.h"\nusing namespace ppl;\n__KERNEL__ void broken_kernel(fp32 *ptr_0) {\n  tiu::nosuch(ptr_0);\n}\n'
    with pytest.raises(runtime.PplCompileError, match="ppl-compile failed with exit status") as info:
        runtime.build(source, "broken", "bm1690", "cmodel", toolchain)
    kept = Path(str(info.value).split("kept at ")[1].split(" ")[0])
    assert kept.read_text() == source and (kept.parent / "build.log").is_file()
    assert "nosuch" in str(info.value) and f"tilelang-tpu {__version__}" in str(info.value)


def test_tile_too_large_for_local_memory(toolchain: setup.TpuToolchain, ppl: Callable[[str], str]) -> None:
    # 3 fp32 tiles of 64 x 65536: 768 KiB per lane, far above BM1690's 256 KiB.
    source = (
        ppl("add_f32_1024.pl")
        .replace("const int BLOCK_N = 256;", "const int BLOCK_N = 65536;")
        .replace("const int N = 1024;", "const int N = 65536;")
    )
    with pytest.raises(runtime.LocalMemoryError, match=r"do not fit in bm1690's local memory.*Use smaller tiles"):
        runtime.build(source, "add", "bm1690", "cmodel", toolchain)


def test_entry_name_must_follow_the_abi(toolchain: setup.TpuToolchain, ppl: Callable[[str], str]) -> None:
    with pytest.raises(TilecoreError, match=r"named 'other_kernel'.*defines \['add_kernel'\]"):
        runtime.build(ppl("add_f32_1024.pl"), "other", "bm1690", "cmodel", toolchain)


def test_bad_arguments_are_rejected_before_launch(toolchain: setup.TpuToolchain, chip_kernels: dict) -> None:
    launch = _launcher(chip_kernels["copy"]("bm1690"), toolchain)
    good = torch.randn(100, 300).to(F16)
    with pytest.raises(KernelArgumentError, match=r"has dtype torch\.float32; expected torch\.float16"):
        launch(good.float())
    with pytest.raises(KernelArgumentError, match=r"has shape \(100, 301\); expected \(100, 300\)"):
        launch(torch.zeros(100, 301, dtype=F16))
    with pytest.raises(KernelArgumentError, match=r"is on device meta; this target takes tensors on cpu"):
        launch(torch.empty(100, 300, dtype=F16, device="meta"))


@pytest.mark.gpu
def test_cuda_tensor_is_rejected(toolchain: setup.TpuToolchain, chip_kernels: dict) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device to make a CUDA tensor")
    launch = _launcher(chip_kernels["copy"]("bm1690"), toolchain)
    with pytest.raises(KernelArgumentError, match=r"is on device cuda:0; this target takes tensors on cpu"):
        launch(torch.zeros(100, 300, dtype=F16, device="cuda"))


def test_pcie_mode_is_refused_clearly(toolchain: setup.TpuToolchain, chip_kernels: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = dataclasses.replace(chip_kernels["copy"]("bm1690"), target=tilecore.resolve_target("tpu:mode=pcie"))
    assert kernel.target.device == "tpu:0"
    with pytest.raises(ToolchainError, match="mode=pcie") as info:
        runtime.create_adapter(kernel, toolchain)
    assert str(info.value) == PCIE_UNSUPPORTED


_CHILD = textwrap.dedent(
    """
    import json, os, sys, torch, tilecore
    from pathlib import Path
    from tilecore import CompiledKernel, TensorParam
    from tilecore._launch import Launcher
    from tilelang_tpu import __version__, runtime, setup
    source = Path(sys.argv[1]).read_text()
    target = tilecore.resolve_target("tpu")
    params = tuple(TensorParam(f"arg{i}", torch.float16, (100, 300)) for i in range(2))
    kernel = CompiledKernel("copy_kernel", source, params, (1,), target)
    launch = Launcher(kernel, runtime.create_adapter(kernel, setup.find_toolchain()))
    x = torch.randn(100, 300).to(torch.float16)
    assert torch.equal(launch(x), x)
    import time
    from tilelang_tpu import emulator
    print("RESULT " + json.dumps({"pid": os.getpid(), "workdir": str(emulator.ensure_workdir())}))
    """
)


_EMULATOR_ENTRY = re.compile(r"^(\d+(-\d+)?|(server|client)_\d+_\d+)$")


def _emulator_entries() -> set[str]:
    """Per-process entries the emulator writes to /tmp when no scratch directory is set."""
    return {n for n in os.listdir("/tmp") if _EMULATOR_ENTRY.match(n)}


def test_emulator_leaves_nothing_in_tmp(toolchain: setup.TpuToolchain, ppl: Callable[[str], str], tmp_path: Path) -> None:
    source = tmp_path / "copy.pl"
    source.write_text(ppl("copy_f16_odd.pl"))
    env = {k: v for k, v in os.environ.items() if k != "TPU_SCALAER_EMULATOR_WORKDIR"}
    before = _emulator_entries()
    result = subprocess.run([sys.executable, "-c", _CHILD, str(source)], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    facts = json.loads(line.removeprefix("RESULT "))
    workdir = Path(facts["workdir"])
    assert workdir.name.startswith(f"tlt-{facts['pid']}-")
    assert not workdir.exists(), "the private emulator workdir must be removed at exit"
    assert _emulator_entries() - before == set(), "the emulator wrote per-process entries to /tmp"


def test_stale_scratch_dirs_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    stale = tmp_path / f"tlt-{int(dead.stdout)}-abc"
    live = tmp_path / f"tlt-{os.getpid()}-def"
    other = tmp_path / "unrelated-dir"
    for folder in (stale / "123-0", live, other):
        folder.mkdir(parents=True)
    assert emulator.remove_stale_workdirs(tmp_path) == [stale]
    assert not stale.exists() and live.is_dir() and other.is_dir()


def test_scratch_dir_of_a_killed_process_is_removed_by_its_janitor(
    toolchain: setup.TpuToolchain, ppl: Callable[[str], str], tmp_path: Path
) -> None:
    """kill -9 of a process whose emulator worker is alive: no exit handler runs, the worker dies
    with it, and the janitor removes the scratch directory in the real temp dir."""
    source = tmp_path / "copy.pl"
    source.write_text(ppl("copy_f16_odd.pl"))
    env = {k: v for k, v in os.environ.items() if k not in ("TPU_SCALAER_EMULATOR_WORKDIR", "TMPDIR")}
    child = subprocess.Popen([sys.executable, "-c", _CHILD + "\nsys.stdout.flush(); time.sleep(600)\n", str(source)],
                             stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        facts = json.loads(line.removeprefix("RESULT "))
        workdir = Path(facts["workdir"])
        assert workdir.is_dir() and workdir.parent == Path("/tmp"), workdir
        owner = (workdir / emulator.OWNER_FILE).read_text().split()
        assert owner[0] == str(child.pid)
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 60
    while workdir.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not workdir.exists(), f"{workdir} of the killed process is still there"


def test_sweep_tells_a_reused_pid_from_the_owner(tmp_path: Path) -> None:
    """A scratch directory whose recorded owner start time differs from the live process of that
    pid belongs to a dead owner whose pid was reused: it is removed; the live owner's is kept."""
    mine = emulator._start_time(os.getpid())
    assert mine
    reused = tmp_path / f"tlt-{os.getpid()}-reused"
    owned = tmp_path / f"tlt-{os.getpid()}-owned"
    bare = tmp_path / f"tlt-{os.getpid()}-bare"  # no owner file yet (being created): kept while the pid lives
    for folder, text in ((reused, f"{os.getpid()} {int(mine) - 1}"), (owned, f"{os.getpid()} {mine}"), (bare, None)):
        folder.mkdir()
        if text is not None:
            (folder / emulator.OWNER_FILE).write_text(text + "\n")
    assert emulator.remove_stale_workdirs(tmp_path) == [reused]
    assert owned.is_dir() and bare.is_dir()


def test_idle_workers_are_stopped(toolchain: setup.TpuToolchain, chip_kernels: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the emulator's threads polled (about a core for BM1690) for the life of the process.
    Now the worker holding them stops after the idle timeout, and the next launch starts a new one."""
    monkeypatch.setenv(runtime.IDLE_TIMEOUT_ENV, "2")
    launch = _launcher(chip_kernels["copy"]("bm1690"), toolchain)
    x = torch.randn(100, 300).to(F16)
    output = launch(x)
    pids = [w._process.pid for w in runtime.WORKERS._workers.values()]
    torch.testing.assert_close(output, x, rtol=0, atol=0)
    assert pids
    deadline = time.monotonic() + 30
    while (len(runtime.WORKERS) or any(os.path.exists(f"/proc/{pid}") for pid in pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(runtime.WORKERS) == 0, "idle workers were not stopped"
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids), "an idle worker process is still alive"
    time.sleep(0.5)
    assert not [t for t in threading.enumerate() if t.name == "tilelang-tpu-worker-reaper"], "the reaper thread outlived the workers"
    torch.testing.assert_close(launch(x), x, rtol=0, atol=0)  # a fresh worker serves the next launch


def test_worker_pool_is_bounded(toolchain: setup.TpuToolchain, chip_kernels: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    if toolchain.missing_libraries("bm1684x"):
        pytest.skip(f"toolchain lacks the BM1684X cmodel: {toolchain.missing_libraries('bm1684x')}")
    monkeypatch.setattr(pool, "MAX_WORKERS", 1)
    copy = _launcher(chip_kernels["copy"]("bm1684x"), toolchain)
    scale_add = _launcher(chip_kernels["scale_add"]("bm1684x"), toolchain)
    x = torch.randn(100, 300).to(F16)
    a, b = torch.randn(130, 700).to(F16), torch.randn(130, 700).to(F16)
    for _ in range(2):
        torch.testing.assert_close(copy(x), x, rtol=0, atol=0)
        torch.testing.assert_close(scale_add(a, b).float(), (a * b + a).float(), rtol=2e-3, atol=2e-3)
        assert len(runtime.WORKERS) == 1
    runtime.close_workers()
