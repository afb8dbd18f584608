"""The ``local`` executor with a process pool: crash isolation of a sweep on one machine.

Unchanged ``@tilelang.autotune`` code (tests/tune_kernels.py) tunes democpu GEMMs in worker
processes.  The faults are real kernels: one config's kernel calls ``raise(SIGSEGV)``, another
``pause()`` (it never returns); no part of tilelang is replaced.  The crashing config is
retried, then recorded lost; the hung one is killed at tilelang's per-config ``timeout`` and
recorded lost; the sweep goes on, and this process loads the best kernel from tilelang's disk
cache without compiling it.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tune_kernels import check_tuned, make_matmul

import tilecore
from tilecore import executor
from tilecore.executor.local import LocalExecutor
from tilecore.executor.spec import parse


class _Compiles(logging.Handler):
    """tilelang's own record of every real compile in this process (never emitted for a disk load)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "begins to compile kernel" in record.getMessage():
            self.seen.append(record.getMessage())


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Compiles]:
    monkeypatch.setenv("TILELANG_PRINT_ON_COMPILATION", "1")
    handler, logger = _Compiles(), logging.getLogger("tilelang")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
def pool() -> Iterator[LocalExecutor]:
    tilecore.activate()
    made: LocalExecutor = executor.configure("local", processes=2, max_retries=1)
    try:
        yield made
    finally:
        made.close()
        executor.reset()


def test_a_crashing_and_a_hung_config_are_lost_and_the_sweep_goes_on(
    pool: LocalExecutor, compiles: _Compiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # tilelang's own tuner (used last) writes autotuner.log into the working directory
    configs = [
        {"BM": 16, "BN": 16, "BK": 16},
        {"BM": 32, "BN": 32, "BK": 16, "fault": "segv"},
        {"BM": 32, "BN": 16, "BK": 32, "fault": "hang"},
        {"BM": 16, "BN": 32, "BK": 32},
    ]
    kernel = make_matmul("democpu", configs=configs, timeout=15)(64, 64, 64)
    results = pool.last_sweep["results"]
    assert [r["status"] for r in results] == ["ok", "lost", "lost", "ok"], results
    assert "killed by SIGSEGV" in results[1]["error"] and results[1]["attempts"] == 2, results[1]  # retried once
    assert "timed out" in results[2]["error"] and results[2]["attempts"] == 1, results[2]  # a hang is not retried
    assert executor.counters()["lost"] == 2 and executor.counters()["sweeps"] == 1
    assert compiles.seen == [], compiles.seen  # the workers compiled; this process loaded the best from disk
    check_tuned(kernel, results)
    # This process's tilelang is untouched by the crashes: it compiles and tunes in its own threads again.
    executor.configure("local")
    again = make_matmul("democpu", rep=2, configs=[{"BM": 64, "BN": 32, "BK": 16}])(64, 64, 64)
    assert len(compiles.seen) == 1
    torch.testing.assert_close(again(torch.eye(64), torch.eye(64)), torch.eye(64))


def test_the_switch_is_parsed_as_every_executor_setting() -> None:
    assert parse("local?processes=4&max_retries=0").options == {"processes": "4", "max_retries": "0"}
    made = LocalExecutor("local?processes=4&max_retries=0")
    assert (made.processes, made.max_retries) == (4, 0)
    assert "4 worker processes" in made.doctor_report()["detail"]
    assert LocalExecutor("local").processes == 0  # tilelang's own sweep, as before
    with pytest.raises(ValueError, match=r"unknown local executor option.*procs"):
        LocalExecutor("local?procs=4")
    with pytest.raises(ValueError, match="processes=-1"):
        LocalExecutor("local", processes=-1)


def test_placement_says_how_many_benchmarks_a_machine_runs_at_once() -> None:
    from tilecore import Placement, PluginValidationError
    from tilecore.executor.outcome import bench_slots, placement

    assert placement("democpu") == Placement() and placement("tpu") == Placement()  # the default: as before
    assert bench_slots(Placement()) == 1 and Placement().exclusive
    assert bench_slots(Placement(per="device", devices=lambda: 3)) == 3
    assert bench_slots(Placement(per="device", devices=lambda: 0)) == 0  # no device here: no bench slot advertised
    assert placement("no-such-target") == Placement()
    with pytest.raises(PluginValidationError, match="per='rack'"):
        Placement(per="rack")
    assert executor.node_resources(["democpu"]) == {"tilecore:democpu:toolchain": 1.0, "tilecore:democpu:bench": 1.0}


DRIVER = """
import os, sys
sys.path.insert(0, {tests!r})
import tilecore
from tilecore import executor
tilecore.activate()
from tune_kernels import make_matmul
executor.configure("local", processes=1)
make_matmul("democpu", configs=[{{"BM": 16, "BN": 16, "BK": 16, "fault": "hang"}}], timeout=600)(64, 64, 64)
"""


def test_a_worker_stuck_in_a_hung_kernel_ends_with_its_killed_driver(tmp_path: Path) -> None:
    import psutil  # a dependency of tilelang

    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(tests=str(Path(__file__).resolve().parent)))
    log = (tmp_path / "driver.log").open("w")
    driver = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, hung = time.monotonic() + 240, None
        while hung is None and time.monotonic() < deadline and driver.poll() is None:
            for child in psutil.Process(driver.pid).children():
                if "sys_pause" in Path(f"/proc/{child.pid}/wchan").read_text():  # in the kernel's pause()
                    hung = child
            time.sleep(0.5)
        assert hung is not None, "the worker never reached the hung kernel: " + (tmp_path / "driver.log").read_text()[-3000:]
        driver.kill()  # kill -9: no atexit, no cleanup in the driver
        driver.wait()
        gone, alive = psutil.wait_procs([hung], timeout=15)
        assert gone and not alive, f"worker {hung.pid} outlived its driver"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        log.close()
