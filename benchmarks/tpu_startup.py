"""tilelang-tpu: BM1690 emulator start-up in fresh processes, and the 31 s stall.

    python benchmarks/tpu_startup.py [--processes 40] [--parallel 2]
    python benchmarks/tpu_startup.py --processes 12 --die-every 3 [--without-fix]

Needs the SophGo toolchain (`tilelang-tpu toolchain install`).  Builds one tiny
kernel (tests/ppl/copy_f16_odd.pl) into a private cache, then starts
--processes fresh interpreters, --parallel at a time, each doing what an
emulator worker does on its first launch: load libtpuv7_rt, tpuRtInit,
tpuRtSetDevice (the emulated device's start-up), tpuRtStreamCreate, then one
launch of the kernel on random data, checked to come back equal.  Prints every
step's time per process and the processes whose start took over 10 s.

--die-every K makes every K-th process die inside tpuRtSetDevice (SIGKILL as
soon as it holds the lock, as a process killed during its start would): the
runtime's machine-wide start-up lock (tilelang_tpu/device_lock.py) is then
left locked, and the next start waits 31 s unless it releases the dead
holder's lock, as tilelang-tpu's worker does; --without-fix skips that release
to show the stall.  Those runs happen in a private System V IPC namespace
(`unshare --ipc`, needs root or user namespaces), so the lock they leave never
stalls anybody else's emulator on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "tilelang_tpu"
PPL = PLUGIN / "tests" / "ppl" / "copy_f16_odd.pl"
SLOW_S = 10.0

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    spawned = float(sys.argv[4])
    main_at = time.time()
    from tilelang_tpu import device_lock, tpuv7
    library_dir, library, die, without_fix = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[5] == "1"
    if without_fix:
        device_lock.clear_stale = lambda: None  # the runtime as SophGo ships it
    if die:
        # Killed while holding the runtime's start-up lock, as a process killed during its start
        # would be: this process is alone in its IPC namespace, so a locked word is its own.
        def kill_when_locked():
            while not ((state := device_lock.inspect()) and state.locked):
                pass
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Thread(target=kill_when_locked, daemon=True).start()
    started = time.perf_counter()
    device = tpuv7.Tpuv7Device(library_dir)
    data = bytearray(os.urandom(100 * 300 * 2))
    buffers = [bytearray(data), bytearray(len(data))]
    launched = time.perf_counter()
    device.run(library, "copy_kernel_entry", buffers)
    done = time.perf_counter()
    assert buffers[0] == data and buffers[1] == data, "the copy kernel's output differs from its input"
    print(json.dumps({"interpreter": main_at - spawned, **device.startup_seconds, "launch": done - launched,
                      "start": launched - started, "stale_lock": bool(device.stale_lock)}))
    """
)


def _child(index: int, args: argparse.Namespace, library: str, library_dir: str, env: dict[str, str]) -> dict[str, Any]:
    die = bool(args.die_every) and index % args.die_every == args.die_every - 1
    workdir = tempfile.mkdtemp(prefix="tls-", dir="/tmp")  # short: the emulator's socket paths must fit
    try:
        command = [
            sys.executable,
            "-c",
            CHILD,
            library_dir,
            library,
            "1" if die else "0",
            str(time.time()),
            "1" if args.without_fix else "0",
        ]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env={**env, "TPU_SCALAER_EMULATOR_WORKDIR": workdir}, check=False)
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        return {"index": index, "died": True, "wall": wall, "returncode": result.returncode, "planned": die}
    return {"index": index, "died": False, "wall": wall, **json.loads(lines[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=40)
    parser.add_argument("--parallel", type=int, default=2, help="processes started at a time")
    parser.add_argument("--die-every", type=int, default=0, help="every K-th process dies inside tpuRtSetDevice")
    parser.add_argument("--without-fix", action="store_true", help="do not release a dead holder's lock (SophGo's behaviour)")
    parser.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.die_every and not args.in_namespace:
        # Leaving the lock stale must not stall anybody else's emulator: own IPC namespace.
        command = ["unshare", "--ipc", sys.executable, *sys.argv, "--in-namespace"]
        if subprocess.run(["unshare", "--ipc", "true"], capture_output=True, check=False).returncode != 0:
            raise SystemExit("--die-every needs `unshare --ipc` (root or unprivileged user namespaces)")
        raise SystemExit(subprocess.run(command, check=False).returncode)

    from tilelang_tpu import runtime, setup

    from tilecore.kit.paths import private_tempdir

    toolchain = setup.find_toolchain()
    library_dir = str(next(iter(toolchain.require_libraries("bm1690").values())).parent)
    with private_tempdir("tpu-startup-") as scratch:
        os.environ["TILECORE_CACHE_DIR"] = str(scratch)
        library = str(runtime.build(PPL.read_text(), "copy_kernel", "bm1690", "cmodel", toolchain).library)
        env = {**os.environ, **toolchain.process_env(), "PYTHONPATH": str(PLUGIN)}
        with ThreadPoolExecutor(args.parallel) as pool:
            rows = list(pool.map(lambda i: _child(i, args, library, library_dir, env), range(args.processes)))
    _report(rows, args)


def _report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    steps = ["interpreter", "load", "tpuRtInit", "stale_lock_check", "tpuRtSetDevice", "tpuRtStreamCreate", "launch"]
    print(f"{args.processes} fresh processes, {args.parallel} at a time" + (f", every {args.die_every}th dies in its start" if args.die_every else "")
          + (", without the stale-lock release" if args.without_fix else ""))  # fmt: skip
    print("| # | " + " | ".join(steps) + " | wall (s) |")
    print("| ---: |" + " ---: |" * (len(steps) + 1))
    for row in rows:
        if row["died"]:
            print(f"| {row['index']} | died (exit status {row['returncode']}{', planned' if row['planned'] else ', NOT planned'}) |")
            continue
        cells = " | ".join(f"{float(row.get(step, 0.0)):.3f}" for step in steps)
        print(
            f"| {row['index']} | {cells} | {float(row['wall']):.2f} |" + (" released a dead holder's lock" if row.get("stale_lock") else "")
        )
    alive = [r for r in rows if not r["died"]]
    starts = [float(r["start"]) for r in alive]
    slow = [r for r in alive if float(r["start"]) > SLOW_S]
    unplanned = [r for r in rows if r["died"] and not r["planned"]]
    if starts:
        print(f"start (load to stream): median {statistics.median(starts):.3f} s, max {max(starts):.3f} s; "
              f"{len(slow)} of {len(alive)} starts over {SLOW_S:.0f} s; {len(unplanned)} unplanned deaths")  # fmt: skip


if __name__ == "__main__":
    main()
