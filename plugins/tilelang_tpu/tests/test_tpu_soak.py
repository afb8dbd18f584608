"""The short soak run (benchmarks/tpu_soak.py): concurrent first starts, compiles and launches on
tpu in fresh interpreters with random kill -9 of interpreters and workers; no hang (deadline), no
orphan (process trees), every surviving result correct (torch), no scratch folder left in the real
temp directory.  Four interpreters, one round, tpu only: 21–44 s at load 6–12 on the 2-core machine.  The
long run (16 x 10 or more, tpu and democpu) and its numbers are in docs/benchmarks/tpu-reliability.md."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tilelang_tpu import setup

SOAK = Path(__file__).resolve().parents[3] / "benchmarks" / "tpu_soak.py"


def test_short_soak_no_hang_no_orphan_every_result_correct(toolchain: setup.TpuToolchain) -> None:
    command = [sys.executable, str(SOAK), "--procs", "4", "--rounds", "1", "--targets", "tpu", "--kill-parents", "0.25",
               "--kill-workers", "0.5", "--kill-window", "10", "--deadline", "400", "--seed", "7", "--json"]  # fmt: skip
    # A private System V IPC namespace where the machine allows one: the leftover-segment count then
    # sees this run's segments only, not those of tests running beside it (pytest-xdist).
    if shutil.which("unshare") and subprocess.run(["unshare", "--ipc", "true"], capture_output=True, check=False).returncode == 0:
        command = ["unshare", "--ipc", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    totals = json.loads(done.stdout.strip().splitlines()[-1])
    assert (totals["hangs"], totals["orphans"], totals["wrong"]) == (0, 0, 0), totals
    assert totals["correct"] == totals["processes_started"] - totals["parents_killed"] >= 3, totals
    assert totals["tpu_worker_starts_seen"] >= 3, totals
    assert totals["scratch_parents"], totals  # where the leftovers were counted
    assert (totals["scratch_dirs_left"], totals["new_in_tmp"], totals["new_shm_segments"]) == ([], [], []), totals
    assert done.returncode == 0, done.stderr[-2000:]
