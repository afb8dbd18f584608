"""Autotuning that outgrows one machine: tilelang's ``@tilelang.autotune`` sweeps on an executor.

User code stays as tilelang writes it.  ``TILECORE_EXECUTOR=ray`` (attach to the running
Ray cluster: ``RAY_ADDRESS`` or ``ray:HOST:PORT``) or :func:`configure` hands every sweep
to the executor of that name, found in the entry-point group ``tilecore.executors``
(``local``: tilelang's own thread pool, the default, or with ``?processes=N`` a pool of worker
processes that isolates crashes; ``ray``: ``pip install 'tilecore[ray]'``).
The bridge offers each ``AutoTuner.run`` to the configured executor; kernels travel through
the signed remote cache (:mod:`tilecore.remote`), and the sweep's result is kept there as a
signed tuning record, so a later process skips the sweep.  See docs/tune-on-a-cluster.md.
"""

from __future__ import annotations

import os
from typing import Any

from tilecore.executor import state

__all__ = ["ENV", "GROUP", "configure", "counters", "current", "doctor_report", "node_resources", "reset"]

ENV = "TILECORE_EXECUTOR"
GROUP = "tilecore.executors"


class _CodeRunner:
    """The executor :func:`configure` chose, offered every sweep before ``TILECORE_EXECUTOR``'s."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor

    def run(self, job: Any) -> Any:
        return self.executor.tune(job)


_runner: _CodeRunner | None = None


def configure(spec: str | None, **options: Any) -> Any:
    """Use the executor ``spec`` names in this process (``"local"``, ``"local?processes=4"``, ``"ray"``, ``"ray:HOST:PORT"``),
    overriding ``TILECORE_EXECUTOR``; ``None`` follows the environment again.  Returns the executor.
    Raises when no executor has that name."""
    global _runner
    from tilecore import _activation, _bridge

    _activation.activate()
    if _runner is not None:
        _bridge.remove_tune_runner(_runner)
        close = getattr(_runner.executor, "close", None)
        if close is not None:  # its worker processes end now, not at exit
            close()
        _runner = None
    if spec is None:
        return None
    _runner = _CodeRunner(_activation.load_executor(spec, **options))
    _bridge.add_tune_runner(_runner, first=True)
    return _runner.executor


def reset() -> None:
    """Forget :func:`configure` and this process's counters."""
    configure(None)
    state.reset()


def current() -> Any:
    """The executor in force: :func:`configure`'s, else ``TILECORE_EXECUTOR``'s, else ``None`` (local)."""
    if _runner is not None:
        return _runner.executor
    spec = os.environ.get(ENV, "").strip()
    if not spec:
        return None
    from tilecore import _activation

    return _activation.load_executor(spec)


def counters() -> dict[str, int]:
    """This process's executor counters: sweeps, record_hits, record_misses, compile_tasks, bench_tasks, lost..."""
    return dict(state.counters)


def doctor_report() -> dict[str, Any]:
    """What ``tilecore doctor`` shows: the executor and, for a cluster, its nodes and resources.  Never raises."""
    spec = os.environ.get(ENV, "").strip()
    if _runner is None and not spec:
        return {"executor": "local", "detail": f"tilelang's autotuner in this process (set {ENV}=ray to tune on a Ray cluster)"}
    try:
        executor = current()
        report: dict[str, Any] = executor.doctor_report()
    except Exception as err:
        return {"executor": spec, "error": f"{type(err).__name__}: {err}"}
    return report


def node_resources(targets: list[str] | None = None) -> dict[str, float]:
    """The Ray resources this node may advertise (``ray start --resources``): for every target
    whose toolchain set-up succeeds here, ``tilecore:<target>:toolchain`` and its
    ``tilecore:<target>:bench`` slots: the target's :class:`tilecore.Placement` says how many
    (one per host by default, one per device for ``per="device"``)."""
    import tilecore
    from tilecore.executor.outcome import bench_slots, placement
    from tilecore.executor.ray_executor import bench_resource, toolchain_resource

    registry = tilecore.activate()
    if targets is None:
        registry.load_all()
    names = targets if targets is not None else [spec.name for _, spec in registry.declared_targets()]
    found: dict[str, float] = {}
    for name in names:
        try:
            tilecore.setup_target(name)
        except Exception:
            continue  # a node without a working toolchain never advertises it
        found[toolchain_resource(name)] = 1.0
        slots = bench_slots(placement(name))
        if slots:
            found[bench_resource(name)] = float(slots)
    return found
