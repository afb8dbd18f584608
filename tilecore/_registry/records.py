"""Records of the registry: one :class:`Backend` per entry point, and the table holding them.

:class:`BackendTable` owns the registry's state (the backend list, the target-name index,
the lock, the hook-caller cache, the host compiler's own kinds); the loading, resolution
and dispatch pieces receive it and never the :class:`~tilecore._registry.registry.Registry`.
Listing reads entry-point metadata only and imports nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tilecore import hookspecs
from tilecore._registry.discovery import DiscoveredBackend, PluginPolicy, discover
from tilecore.errors import Owner, TilecoreError
from tilecore.targets import ResolvedTarget, TargetSpec

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
    (``complete`` when the metadata lists every name; see
    :mod:`tilecore._registry.discovery`); ``targets`` what it declared once loaded.
    """

    name: str
    distribution: str
    version: str
    value: str
    state: State = State.DISCOVERED
    reason: str = ""
    unblock: str = ""  # for a BLOCKED backend: the setting to change (PluginPolicy.unblock)
    error: BaseException | None = None
    plugin: object | None = None
    api_version: str | None = None
    targets: tuple[TargetSpec, ...] = ()
    role: str = hookspecs.BACKEND
    claims: tuple[str, ...] = ()
    complete: bool = False
    duplicates: tuple[str, ...] = ()
    discovered: DiscoveredBackend | None = field(default=None, repr=False)

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


class BackendTable:
    """Every backend of one registry, the name index of loaded targets, and the lock guarding both."""

    def __init__(self, policy: PluginPolicy, builtin_kinds: Callable[[], Iterable[str]]) -> None:
        self.policy = policy
        self._builtin_kinds = builtin_kinds
        self.lock = threading.RLock()
        self.entries: list[Backend] = []
        self.index: dict[str, list[tuple[Backend, TargetSpec]]] = {}
        self.callers: dict[tuple[int, str], Any] = {}
        self._discovered = False

    def builtin_kinds(self) -> set[str]:
        return set(self._builtin_kinds())

    def backends(self) -> list[Backend]:
        """Every backend known so far; reads entry-point metadata, imports nothing."""
        self.ensure_discovered()
        return list(self.entries)

    def ensure_discovered(self) -> None:
        if self._discovered:
            return
        with self.lock:
            if self._discovered:
                return
            for found in discover():
                backend = Backend(
                    found.name,
                    found.distribution,
                    found.version,
                    found.value,
                    claims=found.target_names,
                    complete=found.complete,
                    duplicates=found.duplicates,
                    discovered=found,
                )
                blocked = self.policy.decide(found.name)
                if blocked is not None and found.distribution in self.policy.allowed:
                    blocked = None
                if blocked is None and found.distribution in self.policy.blocked:
                    blocked = f"blocked by TILECORE_PLUGINS=no:{found.distribution}"
                if blocked is not None:
                    backend.state, backend.reason = State.BLOCKED, blocked
                    backend.unblock = self.policy.unblock(found.name, found.distribution)
                self.entries.append(backend)
            self._discovered = True

    def metadata_names(self) -> dict[str, list[Backend]]:
        """Target name -> allowed backends whose metadata claims it (imports nothing)."""
        names: dict[str, list[Backend]] = {}
        for backend in self.backends():
            if backend.state is State.BLOCKED:
                continue
            for name in backend.claims:
                names.setdefault(name, []).append(backend)
        return names

    def declared_targets(self) -> list[tuple[Backend, TargetSpec]]:
        """(backend, spec) of every loaded backend, in load order."""
        return [(b, s) for b in self.entries if b.state is State.LOADED for s in b.targets]

    def known_names(self) -> set[str]:
        """Every target name listed in metadata or declared by a loaded backend."""
        names = set(self.metadata_names())
        names.update(name for _, spec in self.declared_targets() for name in spec.names)
        return names

    def backend_of(self, target: ResolvedTarget) -> Backend:
        for backend in self.entries:
            if backend.name == target.backend and backend.distribution == target.distribution:
                return backend
        raise TilecoreError(f"target {target} names backend {target.backend!r}, which is not registered")

    def index_targets(self, backend: Backend) -> None:
        for spec in backend.targets:
            for name in spec.names:
                self.index.setdefault(name, []).append((backend, spec))
        self.callers.clear()

    def forget(self, backend: Backend) -> None:
        for name in list(self.index):
            self.index[name] = [(b, s) for b, s in self.index[name] if b is not backend]
            if not self.index[name]:
                del self.index[name]
        self.callers.clear()
