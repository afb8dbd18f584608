"""The emulator workers' life cycle under faults (tilelang_tpu/pool.py, lifeline.py, start_lock.py).

Before: a worker whose parent was killed kept spinning with PPID 1; a start
that hung was waited for forever; a worker killed mid-launch broke the kernel
object until it was recompiled (its intact library was deleted).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tilelang_tpu
import torch
from tilelang_tpu import pool, runtime, setup

import tilecore
from tilecore import CompiledKernel, TensorParam
from tilecore._launch import Launcher
from tilecore.kit.artifacts import KernelFaultError

F32 = torch.float32


def _add_launcher(toolchain: setup.TpuToolchain, ppl: Callable[[str], str]) -> Launcher:
    target = tilecore.resolve_target({"kind": "tpu", "chip": "bm1690", "mode": "cmodel"})
    params = tuple(TensorParam(f"arg{i}", F32, (1024, 1024)) for i in range(3))
    kernel = CompiledKernel(name="add", source=ppl("add_f32_1024.pl"), params=params, out_idx=(2,), target=target)
    return Launcher(kernel, runtime.create_adapter(kernel, toolchain))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _workers_of(parent: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if f"TILELANG_TPU_PARENT_PID={parent}\0".encode() in environ + b"\0":
            found.append(int(name))
    return found


def test_a_worker_killed_mid_launch_raises_and_the_kernel_keeps_working(toolchain: setup.TpuToolchain, ppl: Callable[[str], str]) -> None:
    launch = _add_launcher(toolchain, ppl)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a0, b0 = a.clone(), b.clone()
    torch.testing.assert_close(launch(a, b), a + b, rtol=0, atol=0)  # the worker is up
    library = Path(launch.adapter.library_path or "")
    lost = None
    for delay in (0.05, 0.15, 0.3, 0.6, 1.0, 0.02):
        pids = pool.WORKERS.pids()
        killer = threading.Timer(delay, lambda pids=pids: [os.kill(p, signal.SIGKILL) for p in pids])
        killer.start()
        try:
            launch(a, b)
        except pool.WorkerLostError as err:
            lost = err
        killer.join()
        if lost is not None:
            break
    assert lost is not None, "never caught the worker mid-launch"
    assert isinstance(lost, KernelFaultError)
    message = str(lost)
    assert "kernel 'add' for target tpu:chip=bm1690" in message and "next call starts a new emulator worker" in message
    assert "still matches its recorded SHA-256 and is kept" in message
    assert torch.equal(a, a0) and torch.equal(b, b0), "the inputs were touched"
    assert library.is_file(), "an intact library was evicted"
    # The same kernel object works again: a new worker, the same library.
    torch.testing.assert_close(launch(a, b), a0 + b0, rtol=0, atol=0)
    # A worker that died while idle is replaced on the next call too.
    for pid in pool.WORKERS.pids():
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    torch.testing.assert_close(launch(a, b), a0 + b0, rtol=0, atol=0)
    runtime.close_workers()


def test_a_start_without_progress_is_retried_once_then_named(
    toolchain: setup.TpuToolchain, ppl: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    launch = _add_launcher(toolchain, ppl)
    runtime.close_workers()
    monkeypatch.setenv(pool.START_TIMEOUT_ENV, "0.05")  # less than the interpreter needs to start
    before = set(_workers_of(os.getpid()))
    started = time.monotonic()
    with pytest.raises(pool.WorkerStartError) as info:
        launch(torch.randn(1024, 1024), torch.randn(1024, 1024))
    message = str(info.value)
    assert "failed to start twice" in message and "First attempt: no progress for 0 s" in message and "Second attempt" in message
    assert "TILELANG_TPU_START_TIMEOUT" in message and f"tilelang-tpu {tilelang_tpu.__version__}" in message
    assert time.monotonic() - started < 60
    time.sleep(0.5)
    assert [p for p in _workers_of(os.getpid()) if p not in before and _alive(p)] == [], "a timed-out worker survived"
    monkeypatch.delenv(pool.START_TIMEOUT_ENV)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    torch.testing.assert_close(launch(a, b), a + b, rtol=0, atol=0)
    runtime.close_workers()


_PARENT = textwrap.dedent(
    """
    import sys, time, torch, tilecore
    from pathlib import Path
    from tilecore import CompiledKernel, TensorParam
    from tilecore._launch import Launcher
    from tilelang_tpu import runtime, setup
    target = tilecore.resolve_target("tpu")
    params = tuple(TensorParam(f"arg{i}", torch.float32, (1024, 1024)) for i in range(3))
    kernel = CompiledKernel("add", Path(sys.argv[1]).read_text(), params, (2,), target)
    launch = Launcher(kernel, runtime.create_adapter(kernel, setup.find_toolchain()))
    print("COMPILED", flush=True)
    a = torch.randn(1024, 1024)
    assert torch.equal(launch(a, a), a + a)
    print("LAUNCHED", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("when", ["starting", "idle"])
def test_a_worker_dies_with_its_killed_parent(toolchain: setup.TpuToolchain, ppl: Callable[[str], str], tmp_path: Path, when: str) -> None:
    source = tmp_path / "add.pl"
    source.write_text(ppl("add_f32_1024.pl"))
    env = {**os.environ, runtime.IDLE_TIMEOUT_ENV: "600"}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(source)], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    try:
        wanted = "COMPILED" if when == "starting" else "LAUNCHED"
        while (line := parent.stdout.readline()) and line.strip() != wanted:
            pass
        assert line, "the parent ended early"
        deadline = time.monotonic() + 120
        while not (workers := _workers_of(parent.pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert workers, "no worker appeared"
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in workers if _alive(p)], f"the worker outlived its parent killed while {when}"
