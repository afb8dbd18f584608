"""The BM1690 runtime's machine-wide start-up lock (tilelang_tpu/device_lock.py).

A process that dies inside ``tpuRtSetDevice`` leaves the lock locked, and the
next emulator start on the machine waited 31 s for it
(``benchmarks/tpu_startup.py --die-every 3 --without-fix`` reproduces it).  The
test plants exactly that state and starts a real emulator worker on it.  It
runs in a private System V IPC namespace (``unshare --ipc``), so the lock it
leaves locked is never seen by another process on the machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from tilelang_tpu import setup

PROGRAM = textwrap.dedent(
    """
    import ctypes, json, os, subprocess, sys
    from tilelang_tpu import device_lock

    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    assert device_lock.inspect() is None, "the private namespace starts without the segment"
    assert device_lock.make_stale()
    # While a process is attached it may be the holder: the lock is left alone.
    held = libc.shmat(libc.shmget(device_lock.key(), 0, 0), None, 0)
    live = device_lock.inspect()
    cleared_live = device_lock.clear_stale()
    still = device_lock.inspect()
    libc.shmdt(ctypes.c_void_p(held))
    dead = device_lock.inspect()
    worker = subprocess.Popen([sys.executable, "-m", "tilelang_tpu.worker", "bm1690", sys.argv[1]],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ready = json.loads(worker.stdout.readline())
    while "progress" in ready:  # another process's emulator was starting (start_lock.py)
        ready = json.loads(worker.stdout.readline())
    worker.stdin.close()
    worker.wait(timeout=60)
    after = device_lock.inspect()
    print(json.dumps({
        "live": [live.locked, live.attached, live.stale], "cleared_live": cleared_live is not None,
        "still_locked": still.locked, "dead": [dead.locked, dead.attached, dead.stale],
        "ready": ready, "after_locked": bool(after and after.locked),
    }))
    """
)


def _private_ipc_namespace() -> bool:
    return (
        shutil.which("unshare") is not None
        and subprocess.run(["unshare", "--ipc", "true"], capture_output=True, check=False).returncode == 0
    )


def test_a_dead_holders_start_up_lock_is_released_and_a_live_ones_is_not(toolchain: setup.TpuToolchain) -> None:
    if not _private_ipc_namespace():
        pytest.skip("needs `unshare --ipc` (root or user namespaces) to keep the planted lock away from other processes")
    library_dir = next(iter(toolchain.require_libraries("bm1690").values())).parent
    # Short: the emulator's unix socket paths under it must fit in 107 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="tlt-lock-", dir="/tmp"))
    try:
        env = {**toolchain.process_env(), "TPU_SCALAER_EMULATOR_WORKDIR": str(workdir), "PATH": "/usr/bin:/bin",
               "PYTHONPATH": str(Path(setup.__file__).resolve().parents[1])}  # fmt: skip
        result = subprocess.run(
            ["unshare", "--ipc", sys.executable, "-c", PROGRAM, str(library_dir)],
            capture_output=True, text=True, env=env, cwd=workdir, timeout=120, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["live"] == [True, 1, False] and not report["cleared_live"] and report["still_locked"]
    assert report["dead"] == [True, 0, True]
    ready = report["ready"]
    assert ready["ok"] and ready["stale_lock"].startswith("locked, 0 attached"), ready
    # Without the release tpuRtSetDevice waits 31 s; with it, well under a second on an idle machine.
    assert ready["startup"]["tpuRtSetDevice"] < 10.0, ready["startup"]
    assert not report["after_locked"]
