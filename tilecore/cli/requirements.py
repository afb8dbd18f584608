"""The "installed versions" section of ``tilecore doctor``: each backend's tilecore range holds.

pip only warns when ``pip install -U tilecore`` moves tilecore outside the range a backend
declares (``tilecore>=0.2,<0.3``), and the backend may still import; doctor makes that a
problem (exit 1) with the pair to install.  Checked from installed metadata only.  A backend's
tilelang range is the ``tilelang`` section's (:mod:`tilecore.cli.tilelang_check`), which knows the
check mode (``TILECORE_TILELANG_CHECK=seams`` accepts an untested tilelang).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

#: The distributions whose installed version is checked against each backend's requirement.
CHECKED = ("tilecore",)


def problems(distributions: list[str]) -> list[str]:
    """One line per backend requirement on :data:`CHECKED` that the installed versions do not satisfy."""
    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for dist in sorted(set(distributions)):
        try:
            requires = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.name not in CHECKED or (requirement.marker is not None and not requirement.marker.evaluate()):
                continue
            try:
                installed = importlib.metadata.version(requirement.name)
            except importlib.metadata.PackageNotFoundError:
                continue  # a missing tilelang is the activation check's to report
            if not requirement.specifier.contains(installed, prereleases=True):
                found.append(
                    f"{dist} {importlib.metadata.version(dist)} requires {requirement.name}{requirement.specifier}, but "
                    f"{requirement.name} {installed} is installed; fix: install a matching pair, e.g. "
                    f"pip install '{requirement.name}{requirement.specifier}', or upgrade {dist} to a release made for "
                    f"{requirement.name} {installed}"
                )
    return found


def doctor_section(context: Any) -> Any:
    """Fails when an installed backend's requirement on tilecore or tilelang is not met."""
    from tilecore.cli.doctor import Section

    distributions = [b["distribution"] for b in context.report.get("backends", []) if b.get("distribution")]
    found = problems(distributions)
    lines = found or [f"every backend's requirements on {' and '.join(CHECKED)} are met"]
    return Section("installed versions", not found, lines, {"problems": found})
