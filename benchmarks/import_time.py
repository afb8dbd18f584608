"""Cost of tilecore's activation: ``import tilelang`` with autoload on vs off, the
startup hook's cost in interpreters that never import tilelang, and the cost of
``import tilecore`` and the ``tilecore`` CLI, which import neither tilelang nor torch.

    python benchmarks/import_time.py [--runs 7]

Runs alternate on/off in fresh interpreters on this machine and report medians,
so background load affects both sides alike.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

IMPORT = "import time; t = time.perf_counter(); import tilelang; print(time.perf_counter() - t)"


def run(code: str, autoload: bool, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["TILECORE_DISABLE_PLUGIN_AUTOLOAD"] = "" if autoload else "1"
    return subprocess.run([sys.executable, *code.split("\0")], env=env, capture_output=True, text=True, check=True, cwd=cwd)


def hook_cost_us(cwd: str) -> float:
    """Cumulative import time of the startup hook module (python -X importtime)."""
    result = run("-X\0importtime\0-c\0pass", True, cwd)
    for line in result.stderr.splitlines():
        if line.rstrip().endswith("_tilecore_autoload"):
            return float(re.split(r"\s*\|\s*", line.split(":", 1)[1])[1])
    return float("nan")


TILECORE = (
    "import sys, time; t = time.perf_counter(); import tilecore; d = time.perf_counter() - t; "
    "print(d, ','.join(m for m in ('tilelang', 'torch', 'tvm') if m in sys.modules) or '-')"
)


def wall(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, text=True, check=True, cwd=cwd)
    return time.perf_counter() - start


def tilecore_costs(runs: int, cwd: str) -> None:
    """``import tilecore`` in-process time and which heavy modules it pulled in; CLI wall times."""
    imports, heavy = [], set()
    for _ in range(runs):
        seconds, modules = run(f"-c\0{TILECORE}", True, cwd).stdout.split()
        imports.append(float(seconds))
        heavy.add(modules)
    cli = [sys.executable, "-m", "tilecore.cli"]
    timings = {
        "python -c pass": [wall([sys.executable, "-c", "pass"], cwd) for _ in range(runs)],
        "tilecore --help": [wall([*cli, "--help"], cwd) for _ in range(runs)],
        "tilecore list": [wall([*cli, "list"], cwd) for _ in range(runs)],
        "python -c 'import tilelang'": [wall([sys.executable, "-c", "import tilelang"], cwd) for _ in range(runs)],
    }
    print(
        f"import tilecore (in-process)  : median {statistics.median(imports) * 1e3:8.1f} ms  heavy modules imported: {', '.join(sorted(heavy))}"
    )
    base = statistics.median(timings["python -c pass"])
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:<30}: median {median * 1e3:8.1f} ms  ({median / base:5.1f}x python -c pass)")


ACTIVATE = "import tilelang, time; t = time.perf_counter(); import tilecore; print(time.perf_counter() - t)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tilecore-bench-") as cwd:
        on, off, bare_on, bare_off = [], [], [], []
        for _ in range(args.runs):
            for autoload, bucket in ((True, on), (False, off)):
                bucket.append(float(run(f"-c\0{IMPORT}", autoload, cwd).stdout.strip()))
            for autoload, bucket in ((True, bare_on), (False, bare_off)):
                start = time.perf_counter()
                run("-c\0pass", autoload, cwd)
                bucket.append(time.perf_counter() - start)
        hooks = [hook_cost_us(cwd) for _ in range(args.runs)]
        # Activation measured inside one process (autoload off, then `import tilecore`): free of
        # the process-to-process noise that dominates the differences of two ~2 s imports.
        activation = [float(run(f"-c\0{ACTIVATE}", False, cwd).stdout.strip()) for _ in range(args.runs)]
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(f"import tilelang, autoload on : median {m_on * 1e3:8.1f} ms  (runs: {', '.join(f'{v * 1e3:.0f}' for v in on)})")
    print(f"import tilelang, autoload off: median {m_off * 1e3:8.1f} ms  (runs: {', '.join(f'{v * 1e3:.0f}' for v in off)})")
    print(f"activation cost              : {(m_on - m_off) * 1e3:+8.1f} ms  (ratio on/off {m_on / m_off:.3f})")
    print(f"activation in-process        : median {statistics.median(activation) * 1e3:8.1f} ms  (import tilecore after tilelang)")
    print(f"python -c pass, hook active  : median {statistics.median(bare_on) * 1e3:8.1f} ms")
    print(f"python -c pass, hook disabled: median {statistics.median(bare_off) * 1e3:8.1f} ms")
    print(f"startup hook import (-X importtime, cumulative): median {statistics.median(hooks):.0f} us")
    with tempfile.TemporaryDirectory(prefix="tilecore-bench-") as cwd:
        tilecore_costs(args.runs, cwd)


if __name__ == "__main__":
    main()
