"""tilelang-tpu: N BM1690 emulator workers started at once, with and without the start lock.

    python benchmarks/tpu_start_race.py [--workers 16] [--tries 4] [--deadline 90] [--without-lock]

Starts --workers bare emulator workers (``python -m tilelang_tpu.worker bm1690``:
load ``libtpuv7_rt``, ``tpuRtInit``, ``tpuRtSetDevice``, ``tpuRtStreamCreate``)
at the same moment, each with its own scratch folder, and counts those that are
not ready within --deadline seconds (hung) or die, --tries times.
``--without-lock`` sets ``TILELANG_TPU_START_LOCK=0``: the workers then start
as SophGo's runtime does by itself, and two of them can pick the same TCP port
(tilelang_tpu/start_lock.py explains the race).  Hung workers' logs are
searched for the daemon's ``bind tcp server ... failed`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_try(count: int, deadline_s: float, without_lock: bool, library_dir: str, base_env: dict[str, str]) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="tsr-", dir="/tmp"))  # short: the emulator's socket paths live under it
    workers = []
    try:
        for i in range(count):
            workdir = root / str(i)
            workdir.mkdir()
            env = {**base_env, "TPU_SCALAER_EMULATOR_WORKDIR": str(workdir)}
            if without_lock:
                env["TILELANG_TPU_START_LOCK"] = "0"
            log = open(workdir / "log", "wb")  # noqa: SIM115 - closed below
            process = subprocess.Popen([sys.executable, "-m", "tilelang_tpu.worker", "bm1690", library_dir], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=log, env=env, cwd=workdir)  # fmt: skip
            workers.append((process, log, workdir))
        started = time.monotonic()
        selector = selectors.DefaultSelector()
        for process, _log, _dir in workers:
            assert process.stdout is not None
            selector.register(process.stdout, selectors.EVENT_READ, process)
        ready: dict[int, float] = {}
        died: list[int] = []
        while len(ready) + len(died) < count and time.monotonic() - started < deadline_s:
            for key, _ in selector.select(timeout=0.5):
                process = key.data
                line = process.stdout.readline()
                if line and b"progress" in line:
                    continue
                selector.unregister(key.fileobj)
                if line and json.loads(line).get("ok"):
                    ready[process.pid] = time.monotonic() - started
                else:
                    died.append(process.pid)
        hung = [(p, d) for p, _log, d in workers if p.pid not in ready and p.pid not in died]
        collisions = sum(b"bind tcp server" in (d / "log").read_bytes() for _p, d in hung)
        codes = [p.wait(timeout=30) for p, _log, _d in workers if p.pid in died]
        return {
            "ready": len(ready),
            "hung": len(hung),
            "died": len(died),
            "died_on_port_collision": codes.count(75),  # the worker saw its daemon's bind fail (start_lock.py)
            "hung_with_port_collision": collisions,
            "slowest_ready_s": round(max(ready.values(), default=0.0), 1),
        }
    finally:
        for process, _log, _dir in workers:
            assert process.stdin is not None
            process.stdin.close()
        for process, log, _dir in workers:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--tries", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=90.0)
    parser.add_argument("--without-lock", action="store_true")
    args = parser.parse_args()
    from tilelang_tpu import setup

    toolchain = setup.find_toolchain()
    library_dir = str(next(iter(toolchain.require_libraries("bm1690").values())).parent)
    env = toolchain.process_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(setup.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]))
    totals = {"hung": 0, "died": 0, "ready": 0}
    for index in range(args.tries):
        result = one_try(args.workers, args.deadline, args.without_lock, library_dir, env)
        print(f"try {index + 1}: " + ", ".join(f"{k} {v}" for k, v in result.items()), flush=True)
        for key in totals:
            totals[key] += int(result[key])  # type: ignore[call-overload]
    lock = "without the start lock" if args.without_lock else "with the start lock"
    print(f"{lock}: {totals['hung']} hung, {totals['died']} died, {totals['ready']} ready of {args.workers * args.tries} starts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
