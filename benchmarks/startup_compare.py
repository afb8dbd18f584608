"""Start-up cost of ``import tilecore``, ``tilecore --help`` and ``tilecore list``: this tree
against another checkout (e.g. ``git worktree add /tmp/before <rev>``), side by side.

    python benchmarks/startup_compare.py --before /path/to/older/checkout [--runs 3] [--activation]

Both sides run in this interpreter's environment, alternating, in fresh interpreters; the
older tree is put first on ``PYTHONPATH`` (tilecore and every in-repo backend).
``--activation`` measures instead, inside each interpreter, ``import tilecore`` after
``import tilelang`` (the bridge installed; autoload off so nothing activates earlier) and
counts the modules it adds: the ~2 s ``import tilelang`` itself stays out of the figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "import tilecore": ["-c", "import tilecore"],
    "tilecore --help": ["-m", "tilecore.cli", "--help"],
    "tilecore list": ["-m", "tilecore.cli", "list"],
}


def tree_path(root: Path) -> str:
    parts = [root, root / "examples" / "democpu", *sorted((root / "plugins").glob("tilelang_*"))]
    return os.pathsep.join(str(p) for p in parts)


def wall(args: list[str], pythonpath: str | None, cwd: str) -> float:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, capture_output=True, check=True, cwd=cwd)
    return time.perf_counter() - start


ACTIVATE = (
    "import sys, time, tilelang; n = len(sys.modules); t = time.perf_counter(); import tilecore; "
    "d = time.perf_counter() - t; assert tilecore._bridge.installed() is not None; print(d, len(sys.modules) - n)"
)


def activation(sides: dict[str, str], runs: int, cwd: str) -> None:
    times: dict[str, list[float]] = {side: [] for side in sides}
    modules: dict[str, str] = {}
    for run in range(runs):
        for side in sides if run % 2 == 0 else reversed(sides):  # alternate which side goes first
            env = dict(os.environ, PYTHONPATH=sides[side], TILECORE_DISABLE_PLUGIN_AUTOLOAD="1")
            out = subprocess.run([sys.executable, "-c", ACTIVATE], env=env, capture_output=True, text=True, check=True, cwd=cwd)
            seconds, modules[side] = out.stdout.split()
            times[side].append(float(seconds) * 1e3)
    for side, values in times.items():
        print(
            f"activation {side:<6}: median {statistics.median(values):6.1f} ms  min {min(values):6.1f} ms  "
            f"modules added {modules[side]}  (runs: {' '.join(f'{v:.0f}' for v in values)})"
        )
    print(f"load average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--activation", action="store_true", help="in-process activation time instead of start-up")
    args = parser.parse_args()
    sides = {"before": tree_path(args.before.resolve()), "after": tree_path(Path(__file__).resolve().parents[1])}
    if args.activation:
        with tempfile.TemporaryDirectory(prefix="tilecore-bench-") as cwd:
            activation(sides, args.runs, cwd)
        return
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="tilecore-bench-") as cwd:  # not the repo: it would shadow PYTHONPATH
        for _ in range(args.runs):
            for side, path in sides.items():
                for name, command in COMMANDS.items():
                    results.setdefault((name, side), []).append(wall(command, path, cwd))
    print(f"{'command':<18} {'before s':>9} {'after s':>9} {'before/after':>13}   (medians of {args.runs})")
    for name in COMMANDS:
        before, after = (statistics.median(results[(name, side)]) for side in ("before", "after"))
        print(f"{name:<18} {before:9.2f} {after:9.2f} {before / after:13.1f}")


if __name__ == "__main__":
    main()
