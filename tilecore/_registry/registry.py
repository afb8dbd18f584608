"""The backend registry's face: one object per process composing discovery, loading, resolution and dispatch.

Loading is lazy and failure-isolated (the JAX ``xla_bridge`` model): a backend is imported
the first time one of its targets is named (or when ``target="auto"`` needs every backend;
diagnostics import each backend in its own subprocess, see :mod:`tilecore.cli`).  Anything
that goes wrong while importing it, checking its API version or role, collecting and
validating its targets is recorded on its :class:`Backend` record and raised only when the
user names one of its targets.  The state lives in a :class:`BackendTable`; the parts
(:class:`Loader` and :class:`Resolver` in one line, :class:`Dispatcher`) each live in their own
module and share it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pluggy

from tilecore import hookspecs
from tilecore._registry.discovery import PluginPolicy
from tilecore._registry.dispatch import Dispatcher
from tilecore._registry.known import loaded_host_kinds
from tilecore._registry.records import Backend
from tilecore._registry.resolution import Resolver
from tilecore._registry.table import BackendTable
from tilecore.targets import ResolvedTarget, TargetSpec


class Registry(Resolver, Dispatcher):
    """All backends of one process.  Thread-safe; one instance lives in :mod:`tilecore`.

    ``builtin_kinds`` names the targets the host compiler (tilelang) handles by
    itself; naming one of them never imports a backend that does not list it
    in metadata, and an unknown one is left to tilelang rather than reported
    as unknown.  See "Resolution rule" in docs/architecture.md.

    Loading (:class:`~tilecore._registry.loading.Loader`): :meth:`load_all`, :meth:`register`,
    :meth:`add_load_check`; resolution (:class:`~tilecore._registry.resolution.Resolver`):
    :meth:`resolve`, :meth:`select_auto`, :meth:`upstream_extra`,
    :meth:`find_upstream`; hooks (:class:`~tilecore._registry.dispatch.Dispatcher`):
    :meth:`call`, :meth:`setup`, :meth:`doctor_target`.
    """

    def __init__(self, policy: PluginPolicy | None = None, builtin_kinds: Callable[[], Iterable[str]] = loaded_host_kinds) -> None:
        self.policy = policy or PluginPolicy.from_env()
        self._table = BackendTable(self.policy, builtin_kinds)
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._checks = []
        self._setups = {}

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
