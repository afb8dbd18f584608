"""The backend registry's face: one object per process composing discovery, loading, resolution and dispatch.

Loading is lazy and failure-isolated (the JAX ``xla_bridge`` model): a backend is imported
the first time one of its targets is named (or when ``target="auto"`` needs every backend;
diagnostics import each backend in its own subprocess, see :mod:`tilecore.cli`).  Anything
that goes wrong while importing it, checking its API version or role, collecting and
validating its targets is recorded on its :class:`Backend` record and raised only when the
user names one of its targets.  The state lives in a :class:`BackendTable`; the pieces
(:class:`Loader`, :class:`Resolver`, :class:`Dispatcher`) receive it, never this object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pluggy

from tilecore import hookspecs
from tilecore._registry.discovery import PluginPolicy
from tilecore._registry.dispatch import Dispatcher
from tilecore._registry.known import loaded_host_kinds
from tilecore._registry.loading import LoadCheck, Loader
from tilecore._registry.records import Backend
from tilecore._registry.resolution import Resolver
from tilecore._registry.table import BackendTable
from tilecore.kernel import Toolchain
from tilecore.targets import ResolvedTarget, TargetSpec


class Registry:
    """All backends of one process.  Thread-safe; one instance lives in :mod:`tilecore`.

    ``builtin_kinds`` names the targets the host compiler (tilelang) handles by
    itself; naming one of them never imports a backend that does not list it
    in metadata, and an unknown one is left to tilelang rather than reported
    as unknown.  See "Resolution rule" in docs/architecture.md.
    """

    def __init__(self, policy: PluginPolicy | None = None, builtin_kinds: Callable[[], Iterable[str]] = loaded_host_kinds) -> None:
        self.policy = policy or PluginPolicy.from_env()
        self._table = BackendTable(self.policy, builtin_kinds)
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._loader = Loader(self._table, self._pm)
        self._resolver = Resolver(self._table, self._loader)
        self._dispatcher = Dispatcher(self._table, self._pm)

    # -- listing and loading -----------------------------------------------------------------

    def backends(self) -> list[Backend]:
        """Every backend known so far; reads entry-point metadata, imports nothing."""
        return self._table.backends()

    def metadata_names(self) -> dict[str, list[Backend]]:
        """Target name -> allowed backends whose metadata claims it (imports nothing)."""
        return self._table.metadata_names()

    def declared_targets(self) -> list[tuple[Backend, TargetSpec]]:
        """(backend, spec) of every loaded backend, in load order."""
        return self._table.declared_targets()

    def backend_of(self, target: ResolvedTarget) -> Backend:
        return self._table.backend_of(target)

    def load_all(self, timeout: float | None = None) -> None:
        """Import every allowed backend (``target="auto"``, names no metadata lists).

        Each import runs under a deadline (``timeout`` seconds, default
        ``TILECORE_IMPORT_TIMEOUT`` or 60): one that does not finish is recorded
        as failed, naming the backend, instead of hanging the caller.
        """
        self._loader.load_all(timeout)

    def add_load_check(self, check: LoadCheck) -> None:
        """Run ``check(backend, plugin)`` on every backend as it loads; it raises to refuse one."""
        self._loader.add_check(check)

    def _load(self, backend: Backend, timeout: float | None = None) -> None:
        self._loader.load(backend, timeout)

    def register(self, plugin: object, name: str | None = None) -> Backend:
        """Register an in-process backend (notebooks, tests).  Errors raise at once."""
        return self._loader.register(plugin, name)

    def unregister(self, backend: Backend) -> None:
        with self._table.lock:
            self._loader.drop(backend)
            self._dispatcher.forget(backend)
            if backend in self._table.entries:
                self._table.entries.remove(backend)

    # -- resolution --------------------------------------------------------------------------

    def owns(self, target: object) -> bool:
        """Whether a string/dict target names a tilecore-declared target (may import backends)."""
        return self._resolver.owns(target)

    def resolve(self, target: str | Mapping[str, Any] | ResolvedTarget) -> ResolvedTarget | None:
        """Resolve user input to a declared target.

        Returns ``None`` for a kind that no backend declares but the host
        compiler knows (tilelang handles it), and for strings in the host
        compiler's own syntax (``"<kind> -attr=value"``, tags ``"vendor/model"``).
        Raises a :class:`TilecoreError` for anything else that cannot be
        resolved, malformed input included.
        """
        return self._resolver.resolve(target)

    def upstream_extra(self, target: str | Mapping[str, Any]) -> dict[str, Any]:
        """Keys of a target the delegating spec does not declare: passed to TVM as attributes."""
        return self._resolver.upstream_extra(target)

    def select_auto(self) -> ResolvedTarget | None:
        """The available declared target of highest priority, with default options (imports every backend)."""
        return self._resolver.select_auto()

    def find_upstream(self, kind: str) -> tuple[Backend, TargetSpec] | None:
        """The loaded spec that delegates TVM target kind ``kind`` upstream, if any."""
        return self._resolver.find_upstream(kind)

    # -- hooks -------------------------------------------------------------------------------

    def call(self, target: ResolvedTarget, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on the backend owning ``target`` (and wrapper plugins).

        A result of the wrong type raises :class:`HookReturnError`; an exception
        that is not already a :class:`TilecoreError` is re-raised as
        :class:`BackendLoadError` naming the backend and hook, with the original
        chained.
        """
        __tracebackhide__ = True
        return self._dispatcher.call(target, hook, **kwargs)

    def doctor_target(self, backend: Backend, spec: TargetSpec) -> str | None:
        """The backend's suggestion of explicit options for ``doctor`` (hook ``tilecore_doctor_target``)."""
        return self._dispatcher.doctor_target(backend, spec)

    def setup(self, target: ResolvedTarget) -> Toolchain | None:
        """Run the setup hook once per resolved target; failures are not cached."""
        return self._dispatcher.setup(target)
