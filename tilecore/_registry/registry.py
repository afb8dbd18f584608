"""The backend registry's face: one object per process composing discovery, loading, resolution and dispatch.

Loading is lazy and failure-isolated (the JAX ``xla_bridge`` model): a backend is imported
the first time one of its targets is named (or when ``target="auto"`` needs every backend;
diagnostics import each backend in its own subprocess, see :mod:`tilecore.cli`).  Anything
that goes wrong while importing it, checking its API version or role, collecting and
validating its targets is recorded on its :class:`Backend` record and raised only when the
user names one of its targets.  The state lives in :class:`BackendTable`; the parts
(:class:`Loader` and :class:`Resolver` in one line, :class:`Dispatcher`) each live in their own
module and extend it.
"""

from __future__ import annotations

from tilecore._registry.dispatch import Dispatcher
from tilecore._registry.resolution import Resolver


class Registry(Resolver, Dispatcher):
    """All backends of one process.  Thread-safe; one instance lives in :mod:`tilecore`.

    ``Registry(policy=None, builtin_kinds=loaded_host_kinds)``: ``policy`` defaults to
    :meth:`PluginPolicy.from_env`; ``builtin_kinds`` names the targets the host compiler
    (tilelang) handles by itself; naming one of them never imports a backend that does not
    list it in metadata, and an unknown one is left to tilelang rather than reported as
    unknown.  See "Resolution rule" in docs/architecture.md.

    State (:class:`~tilecore._registry.table.BackendTable`): :meth:`backends`,
    :meth:`metadata_names`, :meth:`declared_targets`, :meth:`backend_of`;
    loading (:class:`~tilecore._registry.loading.Loader`): :meth:`load_all`, :meth:`register`,
    :meth:`add_load_check`; resolution (:class:`~tilecore._registry.resolution.Resolver`):
    :meth:`resolve`, :meth:`resolve_with_extra`, :meth:`select_auto`,
    :meth:`find_upstream`; hooks (:class:`~tilecore._registry.dispatch.Dispatcher`):
    :meth:`call`, :meth:`setup`, :meth:`doctor_target`.
    """
