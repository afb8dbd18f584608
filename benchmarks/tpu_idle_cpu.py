"""tilelang-tpu: CPU burnt by an idle process after running kernels on the emulator.

    python benchmarks/tpu_idle_cpu.py [--chip bm1690] [--kernels 3] [--idle 5]

Needs the SophGo toolchain (`tilelang-tpu toolchain install`).  Side by side in
one invocation, each in a fresh interpreter with private caches: run --kernels
distinct kernel libraries once each, wait --settle seconds, then sleep --idle seconds and count the
CPU seconds the process and its emulator workers used meanwhile
(``/proc/<pid>/stat`` of the process and of every live worker, plus reaped
children).  Compared:

  kept      TILELANG_TPU_IDLE_TIMEOUT=0: workers are never stopped (how the
            runtime behaved before: the emulators' threads poll for the life
            of the process)
  default   the default idle timeout: workers stop after 2 s without a launch

Prints CPU cores used while idle (CPU seconds / wall seconds) and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent(
    """
    import json, os, sys, time, torch, tilecore
    from tilecore import CompiledKernel, TensorParam
    from tilelang_tpu import runtime, setup
    chip, kernels, idle, source_path, settle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    tick = os.sysconf("SC_CLK_TCK")

    def cpu_of(pid):
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    def snapshot():
        times = os.times()
        live = {w._process.pid: cpu_of(w._process.pid) for w in list(runtime.WORKERS._workers.values())}
        return cpu_of(os.getpid()), times.children_user + times.children_system, live

    def window_cpu(start, end):
        # A worker reaped during the window adds its whole lifetime to the children's times:
        # subtract what it had used before the window.
        (self0, children0, live0), (self1, children1, live1) = start, end
        reaped = set(live0) - set(live1)
        return (self1 - self0) + (children1 - children0 - sum(live0[p] for p in reaped)) + sum(live1[p] - live0.get(p, 0.0) for p in live1)

    toolchain = setup.find_toolchain()
    target = tilecore.resolve_target({"kind": "tpu", "chip": chip, "mode": "cmodel"})
    base = open(source_path).read()
    for i in range(kernels):
        source = base + f"\\n// variant {i}\\n"
        params = tuple(TensorParam(f"a{j}", torch.float32, (1024, 1024)) for j in range(3))
        kernel = CompiledKernel("add", source, params, (2,), target)
        adapter = runtime.create_adapter(kernel, toolchain)
        a, b, c = torch.randn(1024, 1024), torch.randn(1024, 1024), torch.empty(1024, 1024)
        adapter(a, b, c)
        assert torch.equal(c, a + b)
    workers = len(runtime.WORKERS)
    time.sleep(settle)
    start, wall = snapshot(), time.monotonic()
    time.sleep(idle)
    used, elapsed = window_cpu(start, snapshot()), time.monotonic() - wall
    print("RESULT " + json.dumps({"cores": used / elapsed, "workers_after_runs": workers, "workers_after_idle": len(runtime.WORKERS)}))
    """
)


def measure(chip: str, kernels: int, idle: float, settle: float, timeout: str | None) -> dict:
    root = tempfile.mkdtemp(prefix="tpu-idle-")
    try:
        env = dict(os.environ, TILELANG_CACHE_DIR=os.path.join(root, "tl"), TILECORE_CACHE_DIR=os.path.join(root, "tc"))
        from tilelang_tpu import setup

        env.setdefault(setup.TOOLCHAIN_DIR_ENV, str(setup.install_root()))
        env.pop("TILELANG_TPU_IDLE_TIMEOUT", None)
        if timeout is not None:
            env["TILELANG_TPU_IDLE_TIMEOUT"] = timeout
        source = os.path.join(os.path.dirname(__file__), "..", "plugins", "tilelang_tpu", "tests", "ppl", "add_f32_1024.pl")
        result = subprocess.run(
            [sys.executable, "-c", CHILD, chip, str(kernels), str(idle), source, str(settle)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0:
            raise SystemExit(result.stderr[-3000:])
        line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
        return json.loads(line.removeprefix("RESULT "))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chip", default="bm1690", choices=("bm1690", "bm1684x"))
    parser.add_argument("--kernels", type=int, default=3)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument(
        "--settle", type=float, default=4.0, help="seconds between the last launch and the measurement (default timeout: 2 s)"
    )
    args = parser.parse_args()
    kept = measure(args.chip, args.kernels, args.idle, args.settle, "0")
    default = measure(args.chip, args.kernels, args.idle, args.settle, None)
    print(f"{args.chip}, {args.kernels} kernel libraries, {args.settle:g} s, then {args.idle:g} s idle measured:")
    print(
        f"  workers kept (timeout 0)   {kept['cores']:.3f} cores while idle ({kept['workers_after_runs']} workers, {kept['workers_after_idle']} left)"
    )
    print(
        f"  default idle timeout       {default['cores']:.3f} cores while idle ({default['workers_after_runs']} workers, {default['workers_after_idle']} left)"
    )
    print(f"  ratio default / kept       {default['cores'] / kept['cores']:.3f}" if kept["cores"] else "  ratio: n/a")


if __name__ == "__main__":
    main()
