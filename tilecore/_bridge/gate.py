"""The gate: refuse an unsupported tilelang, or one missing any seam, before patching anything."""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tilecore._bridge.seams import SEAMS, Seam
from tilecore._registry import compat, messages
from tilecore._version import TILELANG_REQUIREMENT, __version__, version_in_range
from tilecore.errors import TilecoreError

if TYPE_CHECKING:
    from tilecore._registry import Backend

#: The plugin attribute naming the tilelang functions (and parameters) a backend's pipeline calls.
SEAMS_ATTRIBUTE = "tilecore_tilelang_seams"


class BridgeError(TilecoreError):
    """tilelang is not a version whose internals this bridge knows."""


def resolve(path: str) -> Any:
    """The object at ``"module"`` or ``"module:Attr.Attr"``."""
    module_name, _, attrs = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in filter(None, attrs.split(".")):
        obj = getattr(obj, attr)
    return obj


def tilelang_version() -> str:
    import tilelang

    return str(getattr(tilelang, "__version__", "0"))


def check_version(version: str) -> bool:
    """Refuse a tilelang outside :data:`tilecore._version.TILELANG_REQUIREMENT` in ``strict`` mode.

    Returns whether ``version`` is untested but accepted (``TILECORE_TILELANG_CHECK=seams`` or
    ``off``): the caller then warns once, after the seams have checked out.
    """
    if version_in_range(version, TILELANG_REQUIREMENT):
        return False
    if compat.check_mode() == "strict":
        raise BridgeError(
            f"tilecore {__version__} is tested with tilelang {TILELANG_REQUIREMENT}; found tilelang {version}.",
            fix=f"install a tested tilelang (pip install 'tilelang{TILELANG_REQUIREMENT}') or a tilecore release made for {version}; "
            f"to try this one, set {compat.CHECK_VARIABLE}=seams (every seam is still checked)",
        )
    return True


def retired(seam: Seam) -> bool:
    """Whether tilelang has the public API that replaces ``seam`` (its ``retired_by``)."""
    if not seam.retired_by:
        return False
    try:
        public = resolve(seam.retired_by)
    except (ImportError, AttributeError):
        return False
    # A name tilecore itself added (``JITKernel.__getitem__`` on an unpatched tilelang) is no public API.
    return not str(getattr(public, "__module__", "")).startswith("tilecore.")


def proposal_merged(proposal: str, seams: Iterable[Seam] = SEAMS) -> bool:
    """Whether tilelang has the public API of ``proposal`` (a note in docs/upstream/)."""
    return any(retired(seam) for seam in seams if seam.proposal == proposal and seam.retired_by)


def retired_seams(seams: Iterable[Seam] = SEAMS) -> list[Seam]:
    """The rows the installed tilelang's public APIs make unnecessary."""
    return [seam for seam in seams if retired(seam)]


def seam_problem(seam: Seam) -> str | None:
    """Why ``seam`` is missing or changed in the installed tilelang, or ``None`` if it is as expected
    (or no longer needed: see :func:`retired`)."""
    if retired(seam):
        return None
    try:
        owner = resolve(seam.owner)
    except (ImportError, AttributeError) as err:
        return f"{seam.owner} is missing ({type(err).__name__}: {err})"
    if seam.kind == "global":
        if owner.get_global_func(seam.attribute, allow_missing=True) is None:
            return f"{seam.name} is not registered"
        return None
    if seam.kind == "item":
        return None if isinstance(owner, dict) else f"{seam.owner} is no longer a dict"
    if seam.kind == "register":
        for table in seam.tables:
            try:
                if not isinstance(resolve(table), dict):
                    return f"{table} is no longer a dict"
            except (ImportError, AttributeError):
                return f"{table} is missing"
    if seam.adds:
        present = seam.attribute in vars(owner) if isinstance(owner, type) else hasattr(owner, seam.attribute)
        ours = str(getattr(getattr(owner, seam.attribute, None), "__module__", "")).startswith("tilecore._bridge")
        return None if ours else (f"{seam.name} now exists; tilecore would shadow it" if present else None)
    if not hasattr(owner, seam.attribute):
        return f"{seam.name} is missing"
    value = getattr(owner, seam.attribute)
    if seam.params:
        try:
            names = set(inspect.signature(value).parameters)
        except (TypeError, ValueError):
            return f"{seam.name} has no inspectable signature"
        missing = [p for p in seam.params if p not in names]
        if missing:
            return f"{seam.name} lost parameter(s) {', '.join(missing)}"
    return None


def problems(seams: Iterable[Seam] = SEAMS) -> list[str]:
    """Every seam problem of the installed tilelang (empty: the bridge can be installed)."""
    return [problem for seam in seams if (problem := seam_problem(seam)) is not None]


@functools.cache
def check() -> None:
    """Version and every seam; raises one :class:`BridgeError` listing all problems.  Cached after success.

    No lock: importing tilelang activates tilecore (the startup hook), which runs this check itself in
    the same thread, and two threads checking at once only check twice.
    """
    version = tilelang_version()
    untested = check_version(version)
    found = problems()
    if found:
        raise BridgeError(
            f"tilelang {version} does not have the internals tilecore {__version__} relies on: " + "; ".join(found) + ".",
            fix=f"install a tested tilelang (pip install 'tilelang{TILELANG_REQUIREMENT}')",
        )
    if untested:
        compat.warn_once(
            f"tilelang {version} is outside the range tilecore {__version__} was tested with ({TILELANG_REQUIREMENT}); "
            f"running because {compat.CHECK_VARIABLE}={compat.check_mode()} and every seam of the bridge checks out."
        )


def declared_seams(plugin: object, *, who: str) -> list[Seam]:
    """The tilelang names a backend's pipeline calls, from its ``tilecore_tilelang_seams`` declaration.

    The declaration maps ``"module:attribute"`` to the parameter names the backend passes, e.g.
    ``{"tilelang.transform:MaterializeKernelLaunch": ("lower_thread_binding",)}``.
    """
    declared = getattr(plugin, SEAMS_ATTRIBUTE, None)
    if declared is None:
        return []
    if not isinstance(declared, Mapping) or not all(
        isinstance(path, str) and ":" in path and isinstance(params, (tuple, list)) and all(isinstance(p, str) for p in params)
        for path, params in declared.items()
    ):
        raise messages.bad_seams(who, SEAMS_ATTRIBUTE, declared)
    rows = []
    for path, params in declared.items():
        module, _, attribute = path.partition(":")
        owner, _, name = attribute.rpartition(".")
        rows.append(Seam(f"{module}:{owner}" if owner else module, name, why=f"called by {who}", params=tuple(params)))
    return rows


def check_loading_backend(backend: Backend, plugin: object) -> None:
    """Refuse a loading backend whose declared seams the installed tilelang lacks, with one error naming each.

    A registry load check (:meth:`tilecore._registry.Registry.add_load_check`): a changed signature
    is a named error at load, not a ``TypeError`` in the middle of a compile.
    ``TILECORE_TILELANG_CHECK=off`` skips it.
    """
    if compat.check_mode() == "off":
        return
    found = problems(declared_seams(plugin, who=backend.label))
    if found:
        raise messages.missing_seams(backend, found, tilelang_version(), compat.declared_range(backend.distribution))


def accepts(path: str, parameter: str) -> bool:
    """Whether the tilelang callable at ``path`` takes a parameter named ``parameter`` (a capability check)."""
    try:
        parameters = inspect.signature(resolve(path)).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return parameter in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
