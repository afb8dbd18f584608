"""Load each backend in its own subprocess, with a deadline, for ``list --load`` and ``doctor``.

A backend that hangs at import, or crashes the interpreter (a native library
fault), must not take the diagnostics down with it, and the report must name
it.  As pytest does for hanging tests (``faulthandler_timeout``) the child arms
:func:`faulthandler.dump_traceback_later` just before the deadline, so a hang
is reported with the file and line it hangs at; a crash is reported with its
signal and, through :func:`faulthandler.enable`, its location.  Backends are
loaded in parallel (a thread per child process; the work is in the children).

The child side is :mod:`tilecore.cli.child` (``python -m tilecore.cli.child``); it
prints, as its last stdout line, :data:`MARKER` followed by its JSON report.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MARKER = "\x1etilecore-report "
DEFAULT_TIMEOUT = 60.0
_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def timeout_from_env() -> float:
    try:
        return float(os.environ.get("TILECORE_DOCTOR_TIMEOUT", "") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def run_child(args: Sequence[str], timeout: float, who: str, block_name: str) -> dict[str, Any]:
    """Run one child; return its report, or a ``failed`` entry naming the hang or crash."""
    # An absolute time: the child may spend a while importing tilecore before it can arm faulthandler.
    dump_at = time.time() + max(timeout * 0.8, 0.5)
    command = [sys.executable, "-m", "tilecore.cli.child", "--dump-at", f"{dump_at:.3f}", *args]
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    fix = f"block it with TILECORE_PLUGINS=no:{block_name} and report it to the authors of its distribution"
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env, start_new_session=True
    ) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(child)
            out, err = child.communicate()
            where = _innermost_frame(err)
            return {
                "error_type": "Timeout",
                "error": f"{who} did not finish loading within {timeout:g} s" + (f"; it hangs at {where}" if where else ""),
                "fix": fix + "; TILECORE_DOCTOR_TIMEOUT or --timeout raises the limit",
            }
    report = _report(out)
    if report is not None:
        return report
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        where = _innermost_frame(err)
        return {
            "error_type": "Crash",
            "error": f"{who} crashed the interpreter ({name})" + (f" at {where}" if where else "") + " while loading",
            "fix": fix,
        }
    tail = " ".join(err.strip().splitlines()[-3:])[-500:]
    return {
        "error_type": "ChildError",
        "error": f"{who}: the diagnostic subprocess exited with status {child.returncode} without a report ({tail})",
        "fix": fix,
    }


def run_many(jobs: Sequence[tuple[Sequence[str], str, str]], timeout: float) -> list[dict[str, Any]]:
    """Run children in parallel; ``jobs`` are ``(args, who, block_name)``; results keep their order."""
    if not jobs:
        return []
    workers = min(len(jobs), max(2, os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: run_child(job[0], timeout, job[1], job[2]), jobs))


def _kill_group(child: subprocess.Popen[str]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()


def _report(out: str) -> dict[str, Any] | None:
    for line in reversed(out.split("\n")):  # not splitlines(): it splits at the \x1e of MARKER
        if line.startswith(MARKER):
            data: dict[str, Any] = json.loads(line[len(MARKER) :])
            return data
    return None


def _innermost_frame(stderr: str) -> str | None:
    """``file:line in func`` of the most recent frame of the first thread faulthandler dumped
    (the main thread is listed with "most recent call first")."""
    match = _FRAME.search(stderr)
    if match is None:
        return None
    return f"{match.group(1)}:{match.group(2)} in {match.group(3)}"
