"""The ``tilelang`` section of ``tilecore doctor``: the check mode, each backend's tested range, forks.

Reads metadata only (no backend is imported here; a backend whose declared seams the installed
tilelang lacks already shows as a failed backend above this section).  The section fails when a
fork owns the ``tilelang`` import package, or when the check mode is ``strict`` and the installed
tilelang is outside the core's or a backend's tested range.
"""

from __future__ import annotations

from typing import Any


def doctor_section(context: Any) -> Any:
    from tilecore._registry import Registry, compat
    from tilecore._version import TILELANG_REQUIREMENT, version_in_range
    from tilecore.cli.doctor import Section

    try:
        mode: str = compat.check_mode()
    except Exception as err:  # an invalid TILECORE_TILELANG_CHECK is the finding
        return Section("tilelang", False, [f"error: {err}"], {"mode": None})
    version = compat.installed_tilelang()
    lines = [f"tilelang {version or 'not installed'}; check mode {mode} ({compat.CHECK_VARIABLE})"]
    ok = True
    core_ok = version is not None and version_in_range(version, TILELANG_REQUIREMENT)
    lines.append(f"tilecore: tested with tilelang {TILELANG_REQUIREMENT}: {'yes' if core_ok else 'NO'}")
    ok &= core_ok or mode != "strict"
    backends = []
    for backend in Registry().backends():
        tested = compat.declared_range(backend.distribution)
        problem = compat.backend_range_problem(backend.distribution, backend.version)
        status = "no tilelang range declared (follows tilecore's)" if not tested else ("yes" if problem is None else "NO")
        lines.append(f"{backend.name} ({backend.owner}): tested with tilelang {tested or TILELANG_REQUIREMENT}: {status}")
        ok &= problem is None or mode != "strict"
        backends.append({"name": backend.name, "distribution": backend.distribution, "tested": tested, "in_range": problem is None})
    fork = compat.fork_problem(scan=True)
    if fork is not None:
        ok = False
        lines += [f"error: {fork}", f"fix: {compat.fork_fix()}"]
    elif not ok:
        lines.append(
            f"fix: install a tested tilelang (pip install 'tilelang{TILELANG_REQUIREMENT}'), or set {compat.CHECK_VARIABLE}=seams to try this one"
        )
    data = {"tilelang": version, "mode": mode, "tested": TILELANG_REQUIREMENT, "core_in_range": core_ok, "backends": backends, "fork": fork}
    return Section("tilelang", ok, lines, data)
