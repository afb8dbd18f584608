"""The registry's state: every backend of one registry, the plugin manager, the caches, the lock.

:class:`BackendTable` owns the state (the backend list, the lock, the plugin manager and its
hook-caller cache, the load checks, the setup cache, the host compiler's own kinds); the
loading, resolution and dispatch parts of the :class:`~tilecore._registry.registry.Registry`
are its subclasses and share it.  Listing reads entry-point metadata only and imports nothing.

``known_targets.json`` records what tilecore knows of targets it does not load: the host
compiler's own target kinds (for the supported tilelang, so the answer is the same before and
after ``import tilelang``) and which distribution provides a well-known target name (the
"pip install ..." hint of the unknown-target message).
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any

import pluggy

from tilecore import hookspecs
from tilecore._registry.discovery import Backend, PluginPolicy, State, discover
from tilecore.errors import TilecoreError
from tilecore.kernel import Toolchain
from tilecore.targets import ResolvedTarget, TargetSpec

# -- what tilecore records about targets it does not load: known_targets.json -----------------------------


@functools.lru_cache(maxsize=1)
def known_targets() -> dict[str, Any]:
    """``host_kinds``; ``distributions``: target name -> the distribution providing it; ``sources``:
    distribution -> its folder in a clone of the repository (the install-from-source hint)."""
    data: dict[str, Any] = json.loads(resources.files("tilecore").joinpath("known_targets.json").read_text())
    return data


def loaded_host_kinds() -> tuple[str, ...]:
    """The host compiler's own target kinds: the live list once its target registry is imported
    (never imported here), else the list recorded for the supported tilelang in known_targets.json,
    so the answer is the same before and after ``import tilelang``."""
    module = sys.modules.get("tvm.target")
    target_cls = getattr(module, "Target", None) if module is not None else None
    if target_cls is None:
        return tuple(known_targets()["host_kinds"])
    return tuple(target_cls.list_kinds())


#: A check run on each backend as it loads (:meth:`Loader.add_load_check`); raises to refuse it.
LoadCheck = Callable[[Backend, object], None]


class BackendTable:
    """Every backend of one registry and the lock guarding it; which loaded backend declares a name is derived from them.

    ``builtin_kinds`` names the targets the host compiler (tilelang) handles by itself; see
    :class:`~tilecore._registry.registry.Registry`.
    """

    def __init__(self, policy: PluginPolicy | None = None, builtin_kinds: Callable[[], Iterable[str]] = loaded_host_kinds) -> None:
        self.policy = policy or PluginPolicy.from_env()
        self._builtin_kinds = builtin_kinds
        self.lock = threading.RLock()
        self.entries: list[Backend] = []
        self.callers: dict[tuple[int, str], Any] = {}
        self._discovered = False
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._checks: list[LoadCheck] = []
        self._setups: dict[ResolvedTarget, Toolchain] = {}

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
            for backend in discover():
                blocked = self.policy.decide(backend.name, backend.distribution)
                if blocked is not None:
                    backend.state = State.BLOCKED
                    backend.reason, backend.unblock = blocked
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

    def declaring(self, name: str) -> list[tuple[Backend, TargetSpec]]:
        """(backend, spec) of every loaded backend that declares ``name``."""
        return [(b, s) for b, s in self.declared_targets() if name in s.names]
