"""Running a backend's external tools (compilers, linkers, probes, SDK scripts): one way, one error shape.

Every backend runs tools: a compiler that builds a kernel library, a compiler's ``--version``,
a device query, a vendor's environment script.  :func:`run_tool` runs one with no stdin,
its output captured as text, in its own process group, so that a tool that does not
finish in time is stopped with everything it started, and nothing it leaves running in
the background outlives the call.  It never raises for a tool that fails: the
:class:`ToolRun` says how it ended.  :func:`check_tool` is the same for a tool that must
succeed: it raises :class:`~tilecore.errors.ToolchainError` (or the caller's subclass)
naming the tool, how it ended and the end of its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilecore.errors import Owner, TilecoreError, ToolchainError


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One run of a tool.  ``returncode`` is ``None`` when it could not be started or was stopped
    at its timeout (``timed_out``; ``failure`` says which); negative for a signal, as
    :mod:`subprocess` reports it."""

    command: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    failure: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def status(self) -> str:
        """How it ended: ``exit status 2``, ``signal SIGSEGV``, or why it did not run to the end."""
        if self.returncode is None:
            return self.failure
        if self.returncode < 0:
            with contextlib.suppress(ValueError):
                return f"signal {signal.Signals(-self.returncode).name}"
        return f"exit status {self.returncode}"

    @property
    def ended(self) -> str:
        """What to say after the tool's name: ``failed with exit status 2``, ``crashed with signal
        SIGSEGV``, or why it did not run to the end."""
        if self.returncode is None:
            return self.failure
        return f"crashed with {self.status}" if self.returncode < 0 else f"failed with {self.status}"

    def excerpt(self, limit: int = 3000) -> str:
        """The tool's error output (its standard output if that is empty), stripped; a longer one
        than ``limit`` keeps its first two thirds and its last third, the middle marked ``[...]``."""
        text = self.stderr.strip() or self.stdout.strip()
        if len(text) <= limit:
            return text
        return f"{text[: limit * 2 // 3]}\n[...]\n{text[-(limit // 3) :]}"

    def log(self) -> str:
        """The whole transcript (command, how it ended, both outputs), to keep next to a failing input."""
        return f"$ {' '.join(self.command)}\n{self.status}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def _stop_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_tool(
    command: Sequence[str | Path], *, timeout: float | None = None, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> ToolRun:
    """Run ``command`` to its end (or ``timeout`` seconds): no stdin, text output (undecodable
    bytes kept as surrogate escapes), its own process group, stopped as a whole on timeout."""
    args = tuple(str(part) for part in command)
    try:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # its own group: stopped as a whole, and a Ctrl-C here stops it below
        )
    except OSError as err:
        return ToolRun(args, None, failure=f"could not be started ({type(err).__name__}: {err})")
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
        failure, timed_out = "", False
    except subprocess.TimeoutExpired:
        _stop_group(process.pid)
        stdout, stderr = process.communicate()
        returncode, failure, timed_out = None, f"did not finish within {timeout:g} s; it and everything it started were stopped", True
    except BaseException:  # KeyboardInterrupt included: nothing of ours keeps running
        _stop_group(process.pid)
        process.wait()
        raise
    finally:
        _stop_group(process.pid)  # whatever it left running in the background is not ours to keep
    return ToolRun(args, returncode, stdout.decode(errors="surrogateescape"), stderr.decode(errors="surrogateescape"), failure, timed_out)


def check_tool(
    command: Sequence[str | Path],
    *,
    owner: Owner | str | None,
    what: str = "",
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    error: type[TilecoreError] = ToolchainError,
) -> ToolRun:
    """:func:`run_tool` for a tool that must succeed; otherwise raises ``error`` (owned by ``owner``)
    saying ``what`` (default: the tool's path) failed or crashed, and quoting the end of its output."""
    run = run_tool(command, timeout=timeout, env=env, cwd=cwd)
    if not run.ok:
        raise error.about(owner, f"{what or run.command[0]} {run.ended}:\n{run.excerpt()}")
    return run


__all__ = ["ToolRun", "check_tool", "run_tool"]
