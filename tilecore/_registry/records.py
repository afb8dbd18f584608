"""The record of one backend: what its metadata says, its load state, its error and the fix.

:mod:`~tilecore._registry.discovery` makes one :class:`Backend` per entry point (reading
metadata only, importing nothing); :func:`tilecore.register` one per in-process backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from importlib.metadata import EntryPoint

from tilecore import hookspecs
from tilecore.errors import Owner
from tilecore.targets import TargetSpec

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
