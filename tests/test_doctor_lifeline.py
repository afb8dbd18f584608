"""Killing ``tilecore doctor`` never orphans its isolation helpers (issue 19, item 9).

A real ``tilecore doctor`` process checks a real installed backend whose import hangs;
once its isolation helper is running, the doctor is killed (SIGTERM or SIGKILL) and
the helper must be gone within seconds (before: it kept running with PPID 1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tcsupport import FakeSite

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process table from /proc (Linux)")


def helpers_of(parent: int) -> list[int]:
    """Running ``tilecore.cli.child`` processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if ppid == parent and b"tilecore.cli.child" in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z" not in state.split()[1]


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_doctor_takes_its_isolation_helper_along(fake_site: FakeSite, how: signal.Signals) -> None:
    fake_site.add("tilelang-hang", "1.0", "tclife_hang", "import time\ntime.sleep(600)\n", entry="hangt", targets=("hangt",))
    script = fake_site.root.parent / "cli_main.py"
    script.write_text("import sys\nfrom tilecore.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    doctor = subprocess.Popen(
        [sys.executable, str(script), "doctor", "--timeout", "300"],
        env=fake_site.env(TILECORE_PLUGINS="hangt"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    helpers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and doctor.poll() is None:
            helpers = helpers_of(doctor.pid)
            if helpers:
                break
            time.sleep(0.2)
        assert helpers, "the doctor started no isolation helper"
        time.sleep(1.0)  # let the helper get into the hanging import
        assert all(alive(pid) for pid in helpers)
        os.kill(doctor.pid, how)
        doctor.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in helpers):
            time.sleep(0.1)
        survivors = [pid for pid in helpers if alive(pid)]
        assert survivors == [], f"isolation helper(s) {survivors} outlived the doctor killed with {how.name}"
    finally:
        if doctor.poll() is None:
            doctor.kill()
            doctor.wait()
        for pid in helpers:  # only if the test failed: never leave them running
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
