"""Which tilelang the core and each backend accept: the check mode, per-backend ranges, forks.

tilelang releases every few weeks, and a backend built for one release may call a pass whose
signature the next one changes.  Three facts decide whether a backend may run:

* **its tested range**: the ``tilelang`` requirement in the backend distribution's own metadata
  (``Requires-Dist``, i.e. ``dependencies = ["tilelang>=A,<B"]`` in its pyproject) --
  the range its authors tested, which pip enforces at install time and tilecore re-checks at load
  time, before importing the backend, because ``pip install -U tilelang`` only warns;
* **its seams**: the tilelang functions and parameters its pipeline calls, declared on the
  plugin as ``tilecore_tilelang_seams`` and checked by the bridge when the backend loads;
* **the check mode**, ``TILECORE_TILELANG_CHECK``: ``strict`` (default: a tilelang outside the
  tested range is refused, by name, for that backend alone), ``seams`` (an untested tilelang is
  accepted when every seam checks out, with one warning naming what is untested) or ``off``.

This module also notices a *fork* owning the ``tilelang`` import package: several distributions
on the package index ship their own ``tilelang/`` and silently overwrite tilelang's files when
installed beside it.  Only the standard library is imported here (``packaging`` lazily, for a
range that is not a plain ``>=A,<B``), and nothing of tilelang: reading metadata is not touching
its internals.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata as metadata
import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Literal

from tilecore._version import TILELANG_REQUIREMENT, version_in_range
from tilecore.errors import TilecoreError

CHECK_VARIABLE = "TILECORE_TILELANG_CHECK"
CheckMode = Literal["strict", "seams", "off"]
CHECK_MODES: tuple[CheckMode, ...] = ("strict", "seams", "off")

_logger = logging.getLogger("tilecore")


def check_mode(environ: Mapping[str, str] | None = None) -> CheckMode:
    """The mode ``TILECORE_TILELANG_CHECK`` selects (``strict`` when unset); a typo is an error, never a silent default."""
    value = (os.environ if environ is None else environ).get(CHECK_VARIABLE, "").strip().lower() or "strict"
    if value not in CHECK_MODES:
        raise TilecoreError(
            f"{CHECK_VARIABLE}={value!r} is not a tilelang check mode; valid modes: {', '.join(CHECK_MODES)}.",
            fix=f"set {CHECK_VARIABLE} to strict (the default), seams or off",
        )
    return value


@functools.cache
def warn_once(message: str) -> None:
    """Log ``message`` as a warning the first time it is seen in this process."""
    _logger.warning("%s", message)


def installed_tilelang() -> str | None:
    """The installed tilelang distribution's version, from its metadata (no import); ``None`` if absent."""
    try:
        return metadata.version("tilelang")
    except metadata.PackageNotFoundError:
        return None


_REQUIREMENT_NAME = re.compile(r"^\s*tilelang\s*(?=[<>=!~(;\s]|$)", re.IGNORECASE)


def declared_range(distribution: str) -> str | None:
    """The tilelang range ``distribution`` declares in its metadata, or ``None`` if it names no tilelang.

    Requirements behind an extra (``; extra == "..."``) are not the tested range and are skipped.
    """
    try:
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return None
    for text in requirements:
        spec, _, marker = text.partition(";")
        match = _REQUIREMENT_NAME.match(spec)
        if match is None or "extra" in marker:
            continue
        return spec[match.end() :].strip().strip("()").replace(" ", "")
    return None


def backend_range_problem(distribution: str, version: str) -> str | None:
    """Why the installed tilelang is outside the range ``distribution`` was tested with, or ``None``.

    ``None`` too when either is unknown: a backend that declares no tilelang range follows the core's.
    """
    tilelang = installed_tilelang()
    tested = declared_range(distribution)
    if tilelang is None or not tested or version_in_range(tilelang, tested):
        return None
    return f"{distribution} {version} was tested with tilelang {tested}; the installed tilelang is {tilelang}"


def range_fix(distribution: str) -> str:
    """What to do about :func:`backend_range_problem`: three ways out, the mode last."""
    tested = declared_range(distribution) or TILELANG_REQUIREMENT
    return (
        f"install a tilelang it was tested with (pip install 'tilelang{tested}'), or a {distribution} release made for "
        f"the installed tilelang (pip install -U {distribution}); to try it anyway, set {CHECK_VARIABLE}=seams"
    )


# -- forks owning the ``tilelang`` import package -------------------------------------------------------------


def _record_hash(distribution: metadata.Distribution, relative: str) -> str | None:
    """The ``sha256=...`` RECORD entry of ``relative`` in ``distribution``, or ``None``."""
    record = distribution.read_text("RECORD") or ""
    prefix = relative + ","
    for line in record.splitlines():
        if line.startswith(prefix):
            return line.split(",")[1] or None
    return None


def _file_hash(path: str) -> str:
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def tilelang_forks() -> list[str]:
    """Every installed distribution but tilelang whose RECORD lists files of the ``tilelang`` import package (a full scan)."""
    forks = set()
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"] or "?"
        record = distribution.read_text("RECORD") or ""
        if name.lower() != "tilelang" and any(line.startswith("tilelang/") for line in record.splitlines()):
            forks.add(name)
    return sorted(forks, key=str.lower)


def fork_problem(*, scan: bool = False) -> str | None:
    """Why the ``tilelang`` import package is not tilelang's own (a fork installed in its place), or ``None``.

    The quick check (activation) compares the hash tilelang's RECORD holds for ``tilelang/__init__.py``
    with the file on disk: a fork that overwrote the package changes it.  ``scan`` (``tilecore doctor``)
    also lists every distribution whose files overlap the package.
    """
    module = sys.modules.get("tilelang")
    init = getattr(module, "__file__", None)
    try:
        own: metadata.Distribution | None = metadata.distribution("tilelang")
    except metadata.PackageNotFoundError:
        own = None
    problem = None
    if init and own is None:
        problem = "the tilelang import package was not installed by the tilelang distribution"
    elif init and own is not None:
        expected = _record_hash(own, "tilelang/__init__.py")
        if expected is not None and os.path.isfile(init) and _file_hash(init) != expected:
            problem = (
                f"tilelang {own.version}'s files were overwritten by another distribution (tilelang/__init__.py differs from its RECORD)"
            )
    if scan or problem is not None:
        others = tilelang_forks()
        if others:
            problem = (problem + "; " if problem else "") + (
                f"distribution(s) {', '.join(others)} also install files into the tilelang package (a fork of tilelang, not a plugin)"
            )
    return problem


def fork_fix() -> str:
    """The fix for :func:`fork_problem`, naming the forks when the scan found them."""
    return (
        f"uninstall the fork (pip uninstall {' '.join(tilelang_forks()) or '<the fork>'}) and reinstall tilelang "
        f"(pip install --force-reinstall 'tilelang{TILELANG_REQUIREMENT}'); tilecore backends install beside tilelang, never in place of it"
    )
