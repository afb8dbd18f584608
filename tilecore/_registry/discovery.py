"""Finding installed backends without importing them, and the record kept of each.

Backends are entry points in the group ``tilecore.backends``; the entry
point's name is the backend name.  Listing reads distribution metadata only;
importing a backend is the registry's job and happens on first use.

Target names in metadata
    A distribution lists every target name and alias its backend declares in
    the group ``tilecore.targets``, one entry point per name whose value is the
    backend's entry-point value::

        [project.entry-points."tilecore.backends"]
        acme = "tilelang_acme.plugin"
        [project.entry-points."tilecore.targets"]
        acme = "tilelang_acme.plugin"
        acme-x = "tilelang_acme.plugin"      # an alias

    With that list (``complete`` metadata) the registry resolves a name, detects
    a clash between two distributions and answers "unknown target, did you
    mean ..." without importing anything.  A backend without such entries is
    *legacy*: its entry-point name is taken as its one known name, and naming a
    target no metadata lists imports the legacy backends (they may declare it).

Environment (read once per activation):

``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``
    Load no entry points, except backends named positively in
    ``TILECORE_PLUGINS`` (as ``PYTEST_PLUGINS`` does for pytest).
``TILECORE_PLUGINS="acme,no:other"``
    Comma-separated backend names.  ``no:NAME`` blocks a backend.  Plain names
    form an allow-list: when any is given, only those backends load.

:func:`discover` makes one :class:`Backend` record per entry point (reading metadata only,
importing nothing); :func:`tilecore.register` one per in-process backend.  The record holds
what the metadata says, the load state, the error and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from importlib.metadata import EntryPoint, entry_points

from tilecore import hookspecs
from tilecore.errors import Owner
from tilecore.targets import TargetSpec

ENTRY_POINT_GROUP = "tilecore.backends"
_TRUTHY = {"1", "true", "yes", "on"}

IN_PROCESS = "<in-process>"


class State(str, Enum):
    DISCOVERED = "not loaded"
    LOADED = "loaded"
    FAILED = "failed"
    BLOCKED = "blocked"


@dataclass(eq=False)
class Backend:
    """One backend: an entry point or an object given to :func:`tilecore.register`.

    ``claims`` are the target names its distribution's metadata lists
    (``complete`` when the metadata lists every name, else just the entry-point name; see
    :mod:`tilecore._registry.discovery`); ``targets`` what it declared once loaded.
    ``duplicates`` names other distributions registering the identical entry point (same
    name and value): shown by ``tilecore list``, never silently collapsed.  ``entry_point``
    is ``None`` for an in-process backend.
    """

    name: str
    distribution: str
    version: str
    value: str
    state: State = State.DISCOVERED
    reason: str = ""
    unblock: str = ""  # for a BLOCKED backend: the setting to change (PluginPolicy.decide)
    error: BaseException | None = None
    plugin: object | None = None
    api_version: str | None = None
    targets: tuple[TargetSpec, ...] = ()
    role: str = hookspecs.BACKEND
    claims: tuple[str, ...] = ()
    complete: bool = False
    duplicates: tuple[str, ...] = ()
    entry_point: EntryPoint | None = field(default=None, repr=False)

    @property
    def owner(self) -> str:
        return f"{self.distribution} {self.version}"

    @property
    def error_owner(self) -> Owner:
        return Owner(self.distribution, self.version, backend=self.name)

    def error_owner_of(self, spec: TargetSpec) -> Owner:
        return Owner(self.distribution, self.version, target=spec.name, backend=self.name)

    @property
    def label(self) -> str:
        return str(self.error_owner)

    def error_text(self, *, with_fix: bool = True) -> str:
        """``Type: message`` of the load error; ``with_fix=False`` drops the " Fix: ..." a
        :class:`TilecoreError` appends, for a text that gives :attr:`fix` on its own."""
        if self.error is None:
            return ""
        text = str(self.error)
        own_fix = getattr(self.error, "fix", "")
        if not with_fix and own_fix:
            text = text.removesuffix(f" Fix: {own_fix}")
        return f"{type(self.error).__name__}: {text}"

    @property
    def fix(self) -> str:
        """What to do about a failed or blocked backend ("" when nothing is wrong)."""
        if self.state is State.BLOCKED:
            return self.unblock or "unset TILECORE_PLUGINS and TILECORE_DISABLE_PLUGIN_AUTOLOAD"
        if self.state is not State.FAILED:
            return ""
        specific = getattr(self.error, "fix", "")
        generic = f"block it with TILECORE_PLUGINS=no:{self.block_name}"
        if specific:
            return f"{specific}; or {generic}"
        return f"reinstall or upgrade it (pip install --force-reinstall {self.distribution}), or report it to its authors; or {generic}"

    @property
    def block_name(self) -> str:
        """The ``TILECORE_PLUGINS=no:...`` name that blocks this backend alone."""
        return self.distribution if self.duplicates else self.name

    def declared_names(self) -> set[str]:
        return {name for spec in self.targets for name in spec.names}


@dataclass(frozen=True, slots=True)
class PluginPolicy:
    """Which entry points may load, from the environment."""

    autoload: bool
    allowed: frozenset[str]
    blocked: frozenset[str]

    @classmethod
    def from_env(cls, environ: os._Environ[str] | dict[str, str] | None = None) -> PluginPolicy:
        environ = os.environ if environ is None else environ
        autoload = environ.get("TILECORE_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in _TRUTHY
        allowed: set[str] = set()
        blocked: set[str] = set()
        for item in environ.get("TILECORE_PLUGINS", "").split(","):
            item = item.strip()
            if not item:
                continue
            if item.startswith("no:"):
                blocked.add(item[3:].strip())
            else:
                allowed.add(item)
        return cls(autoload=autoload, allowed=frozenset(allowed), blocked=frozenset(blocked))

    def decide(self, name: str, distribution: str) -> tuple[str, str] | None:
        """``None`` if backend ``name`` of ``distribution`` may load, else the reason it may not and
        the one setting to change (``no:`` and the allow-list take a backend's name or its distribution's)."""
        for word in (name, distribution):
            if word in self.blocked:
                return f"blocked by TILECORE_PLUGINS=no:{word}", f"remove no:{word} from TILECORE_PLUGINS"
        allowed = ",".join(sorted(self.allowed))
        if self.allowed and not {name, distribution} & self.allowed:
            reason = f"not in the TILECORE_PLUGINS allow-list ({', '.join(sorted(self.allowed))})"
            return reason, f"add {name} to TILECORE_PLUGINS={allowed}, or unset TILECORE_PLUGINS"
        if not self.allowed and not self.autoload:
            reason = f"autoload disabled by TILECORE_DISABLE_PLUGIN_AUTOLOAD (name it in TILECORE_PLUGINS={name} to load it)"
            return reason, f"set TILECORE_PLUGINS={name}, or unset TILECORE_DISABLE_PLUGIN_AUTOLOAD"
        return None


TARGETS_GROUP = "tilecore.targets"


def _dist_of(ep: EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    if dist is None:
        return "<unknown distribution>", "?"
    return str(dist.metadata["Name"]), str(dist.version)


def discover() -> list[Backend]:
    """A :class:`Backend` record per entry point of the group, sorted by name, value and distribution
    (a deterministic load order); ``claims`` are the names the distribution lists in ``tilecore.targets``
    for it (``complete`` is then true), else just the entry-point name.

    One distribution seen twice (a ``lib64 -> lib`` symlink) is one entry:
    ``importlib.metadata`` already merges a distribution name found on two
    paths, and the key below includes the distribution.  Two *different*
    distributions registering the same entry point are both kept and marked.
    """
    listed: dict[tuple[str, str], list[str]] = {}
    for ep in entry_points(group=TARGETS_GROUP):
        listed.setdefault((_dist_of(ep)[0], ep.value), []).append(ep.name)
    found: dict[tuple[str, str, str], tuple[EntryPoint, str]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist_name, dist_version = _dist_of(ep)
        found.setdefault((ep.name, ep.value, dist_name), (ep, dist_version))
    result = []
    for (name, value, dist_name), (ep, dist_version) in sorted(found.items()):
        names = listed.get((dist_name, value))
        duplicates = tuple(d for (n, v, d) in sorted(found) if (n, v) == (name, value) and d != dist_name)
        result.append(
            Backend(
                name,
                dist_name,
                dist_version,
                value,
                claims=tuple(sorted(set(names))) if names else (name,),
                complete=bool(names),
                duplicates=duplicates,
                entry_point=ep,
            )
        )
    return result
