"""Start-up time of ``tilecore --help``, ``tilecore --version`` and ``tilecore list`` (metadata view),
next to a bare interpreter, measured side by side in one run (hyperfine-style timing loop).

    python benchmarks/cli_startup.py [--runs 7]

Commands run round-robin in fresh interpreters from a scratch directory and the
medians are reported, so background load affects every command alike.  The
target (issue 12) is < 0.3 s for ``--help`` and ``list``; it needs ``import
tilecore`` to import neither tilelang nor torch.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "tilecore --help": [sys.executable, "-m", "tilecore.cli", "--help"],
    "tilecore --version": [sys.executable, "-m", "tilecore.cli", "--version"],
    "tilecore list": [sys.executable, "-m", "tilecore.cli", "list"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="tilecore-bench-") as cwd:
        for _ in range(args.runs):
            for name, command in COMMANDS.items():
                start = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True, cwd=cwd)
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["python -c pass"])
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:<20} median {median * 1e3:8.1f} ms  ({median / base:5.1f}x bare python)  runs: {', '.join(f'{v * 1e3:.0f}' for v in values)}"
        )


if __name__ == "__main__":
    main()
