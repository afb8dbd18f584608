"""The heavy half of the conformance pytest plugin: fixtures, skips and the report.

Registered by the light half (top-level module ``_tilecore_conformance``) when ``--tilecore-target``
is given.  It

* points ``TILELANG_CACHE_DIR`` at a fresh private directory for the session
  (or ``--tilecore-cache-dir``), so every case compiles for real and the
  disk-cache case has a known cache to hit.  ``TILECORE_CACHE_DIR`` is left
  alone: backends keep installed toolchains there (downloads of hundreds of MB), and
  their build products are keyed by source, flags and toolchain;
* provides the fixtures the bundled cases use (``tilecore_target``,
  ``tilecore_device``, ``conformance_kernels``);
* reports a case whose ``tilecore_requires`` marker names a construct in
  ``TargetSpec.unsupported`` as ``unsupported`` and, when the target's probe
  says it cannot run here, skips the cases marked ``tilecore_device``;
* prints the case x status table at the end of the session and writes it as
  JSON with ``--tilecore-json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _tilecore_conformance import is_case_file

from tilecore.conformance.report import CaseResult, Report, render_table

if TYPE_CHECKING:
    from tilecore.targets import ResolvedTarget

STATE_KEY = pytest.StashKey["ConformanceState"]()
CACHE_VARS = ("TILELANG_CACHE_DIR",)
#: States of the configured sessions (a stack: pytester can nest in-process runs).
#: ``pytest_runtest_logreport`` receives no config, so it reads the innermost one.
_ACTIVE: list[ConformanceState] = []


@dataclass(eq=False)
class ConformanceState:
    """Everything the plugin keeps for one pytest session."""

    target_text: str
    kernel_style: str | None
    json_path: str | None
    cache_dir: Path
    stack: contextlib.ExitStack
    saved_env: dict[str, str | None]
    cases: dict[str, str] = field(default_factory=dict)  # nodeid -> case name
    results: dict[str, CaseResult] = field(default_factory=dict)  # case name -> result
    started: float = field(default_factory=time.perf_counter)


# ----------------------------------------------------------------------------------------
# Session set-up
# ----------------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    from tilecore.kit.paths import private_tempdir

    stack = contextlib.ExitStack()
    explicit = config.getoption("tilecore_cache_dir")
    if explicit:
        cache_dir = Path(explicit).expanduser().resolve()
        cache_dir.mkdir(parents=True, exist_ok=True)
    else:
        cache_dir = stack.enter_context(private_tempdir("tilecore-conformance-"))
    saved = {name: os.environ.get(name) for name in CACHE_VARS}
    # tilelang reads the variable at each use, so setting it here (even after tilelang
    # was imported) applies to every compile of the session and is inherited by the
    # second process of the disk-cache case.
    os.environ["TILELANG_CACHE_DIR"] = str(cache_dir)
    state = ConformanceState(
        target_text=config.getoption("tilecore_target"),
        kernel_style=config.getoption("tilecore_kernel_style"),
        json_path=config.getoption("tilecore_json"),
        cache_dir=cache_dir,
        stack=stack,
        saved_env=saved,
    )
    config.stash[STATE_KEY] = state
    _ACTIVE.append(state)
    config.addinivalue_line("markers", "tilecore_requires(*constructs): conformance case needing these constructs")
    config.addinivalue_line("markers", "tilecore_device: conformance case that runs kernels on the target's device")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if state in _ACTIVE:
        _ACTIVE.remove(state)
    for name, value in state.saved_env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    state.stack.close()


def _state(config: pytest.Config) -> ConformanceState:
    return config.stash[STATE_KEY]


# ----------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tilecore_target_text(pytestconfig: pytest.Config) -> str:
    """The target exactly as given on the command line (what user code passes as ``target=``)."""
    return _state(pytestconfig).target_text


@pytest.fixture(scope="session")
def tilecore_target(tilecore_target_text: str) -> Any:
    """The :class:`tilecore.ResolvedTarget` under test."""
    return _resolve(tilecore_target_text)


@pytest.fixture(scope="session")
def tilecore_device(tilecore_target: Any) -> Any:
    """The torch device the target's kernels take tensors on."""
    import torch

    return torch.device(tilecore_target.device)


@pytest.fixture(scope="session")
def conformance_kernels(pytestconfig: pytest.Config, tilecore_target_text: str, tilecore_target: Any) -> Any:
    """Compiles the named kernels of :data:`tilecore.conformance.kernels.KERNELS` once per session."""
    from tilecore.conformance.runner import KernelBuilder

    return KernelBuilder(tilecore_target_text, tilecore_target, _state(pytestconfig).kernel_style)


def _resolve(text: str) -> ResolvedTarget:
    import tilecore

    resolved = tilecore.resolve_target(text)
    if resolved is None:
        raise tilecore.UnknownTargetError(
            f"{text!r} is one of tilelang's built-in target kinds, which no installed tilecore backend declares; "
            "the conformance suite tests tilecore targets. Install the backend that provides it."
        )
    return resolved


# ----------------------------------------------------------------------------------------
# Unsupported constructs and unavailable devices
# ----------------------------------------------------------------------------------------


#: Report order of the case files: declaration first, the slow second process last.
FILE_ORDER = ("cases_target.py", "cases_kernels.py", "cases_profiler.py", "cases_errors.py", "cases_cache.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    slots = [i for i, item in enumerate(items) if is_case_file(Path(str(item.path)))]
    ours = [items[i] for i in slots]

    def rank(item: pytest.Item) -> int:
        name = Path(str(item.path)).name
        return FILE_ORDER.index(name) if name in FILE_ORDER else len(FILE_ORDER)

    for slot, item in zip(slots, sorted(ours, key=rank), strict=True):  # stable: keeps order within a file
        items[slot] = item
        state.cases[item.nodeid] = case_name(item)


def case_name(item: pytest.Item) -> str:
    """``test_elementwise[float16]`` -> ``elementwise[float16]``."""
    return item.name.removeprefix("test_")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = _state(item.config)
    if item.nodeid not in state.cases:
        return
    needed = [c for marker in item.iter_markers("tilecore_requires") for c in marker.args]
    if not needed and item.get_closest_marker("tilecore_device") is None:
        return
    try:
        target = _resolve(state.target_text)
    except Exception:
        return  # the fixture raises the same error and the case is reported as an error
    missing = sorted(set(needed) & set(target.spec.unsupported))
    if missing:
        pytest.skip(f"unsupported: {', '.join(missing)} (declared in TargetSpec.unsupported of {target.name!r} by {target.owner})")
    if item.get_closest_marker("tilecore_device") is not None:
        from tilecore._registry import probe

        availability = probe(target.spec)
        if not availability:
            pytest.skip(f"target {target} cannot run kernels on this machine: {availability.reason}")


# ----------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr or "")
    return " ".join(text.split())[:400]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    state = _ACTIVE[-1] if _ACTIVE else None
    if state is None or report.nodeid not in state.cases:
        return
    name = state.cases[report.nodeid]
    result = state.results.get(name)
    if report.when == "setup":
        if report.failed:
            state.results[name] = CaseResult(name, "error", _reason(report), report.duration)
        elif report.skipped:
            reason = _reason(report)
            status = "unsupported" if reason.startswith("unsupported:") else "skipped"
            state.results[name] = CaseResult(name, status, reason, report.duration)
    elif report.when == "call":
        if report.passed:
            state.results[name] = CaseResult(name, "passed", "", report.duration)
        elif report.skipped:
            reason = _reason(report)
            status = "unsupported" if reason.startswith("unsupported:") else "skipped"
            state.results[name] = CaseResult(name, status, reason, report.duration)
        else:
            state.results[name] = CaseResult(name, "failed", _reason(report), report.duration)
    elif report.when == "teardown" and report.failed and (result is None or result.status == "passed"):
        state.results[name] = CaseResult(name, "error", "teardown: " + _reason(report), report.duration)


def build_report(state: ConformanceState) -> Report:
    import tilelang

    import tilecore
    from tilecore.conformance.kernels import style_for

    target: dict[str, Any] = {"requested": state.target_text}
    try:
        resolved = _resolve(state.target_text)
    except Exception as err:
        target["error"] = f"{type(err).__name__}: {err}"
    else:
        target.update(
            resolved=str(resolved),
            distribution=resolved.distribution,
            version=resolved.version,
            device=resolved.device,
            unsupported=sorted(resolved.spec.unsupported),
            kernel_style=state.kernel_style or style_for(resolved),
        )
    order = list(dict.fromkeys(state.cases.values()))
    results = [state.results[name] for name in order if name in state.results]
    return Report(
        target=target,
        tilecore=tilecore.__version__,
        tilelang=getattr(tilelang, "__version__", "?"),
        python=sys.version.split()[0],
        duration_s=round(time.perf_counter() - state.started, 2),
        cases=results,
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.cases:
        return
    report = build_report(state)
    terminalreporter.section("tilecore conformance")
    for line in render_table(report).splitlines():
        terminalreporter.write_line(line)
    if state.json_path:
        from tilecore.kit.paths import atomic_write

        path = Path(state.json_path).expanduser().resolve()
        atomic_write(path, (json.dumps(report.as_dict(), indent=2) + "\n").encode())
        terminalreporter.write_line(f"conformance results written to {path}")
