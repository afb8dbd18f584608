"""Activation: the process-wide registry, connected to tilelang through the bridge.

It happens right after ``import tilelang`` (the startup hook installed with the
distribution, unless ``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``), or explicitly with
:func:`activate`.  Activation is also the registration point of the features: after
installing the bridge it adds the remote compile-cache tier and the tune runner that
follows ``TILECORE_EXECUTOR`` (executors are found by name in the entry-point group
``tilecore.executors``), so the bridge never imports a feature.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from importlib import metadata
from typing import Any

from tilecore._registry import Registry

_logger = logging.getLogger("tilecore")
_registry: Registry | None = None
_registry_lock = threading.Lock()

#: Why the last activation failed (shown by ``tilecore list``/``doctor``), or ``None``.
activation_error: BaseException | None = None


def get_registry() -> Registry:
    """The process-wide registry (created on first use; reads the environment then)."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = Registry()
    return _registry


class RemoteCacheTier:
    """The remote compile cache (:mod:`tilecore.remote`) as one of the bridge's cache tiers.

    Both methods return at once unless a remote cache URL is configured
    (``TILECORE_REMOTE_CACHE`` or :func:`tilecore.remote.configure`); the package is imported
    on the first local miss, not when activation adds the tier.
    """

    def fetch(self, key: str, cache_path: str, context: Any) -> bool:
        from tilecore import remote

        if not remote.enabled():
            return False
        return remote.lookup_into(cache_path, key, context.versions, staging_dir=context.staging_dir)

    def publish(self, key: str, cache_path: str, context: Any) -> None:
        from tilecore import remote

        if remote.enabled():
            remote.publish_async(cache_path, key, context.versions, verify=context.verify)

    def __repr__(self) -> str:
        return "<tilecore remote cache tier>"


EXECUTOR_ENV = "TILECORE_EXECUTOR"
EXECUTOR_GROUP = "tilecore.executors"


def load_executor(spec: str, **options: Any) -> Any:
    """The executor ``spec`` names (``"ray"``, ``"ray:10.0.0.5:6379?max_retries=2"``, ``"local"``),
    built by the factory its name has in the entry-point group ``tilecore.executors``."""
    from tilecore.errors import TilecoreError

    name = spec.split(":", 1)[0].split("?", 1)[0].strip().lower()
    found = {ep.name: ep for ep in metadata.entry_points(group=EXECUTOR_GROUP)}
    if name not in found:
        raise TilecoreError(
            f"no tilecore executor {name!r} (from {spec!r}): entry-point group {EXECUTOR_GROUP!r} has {', '.join(sorted(found)) or 'none'}",
            fix="install the distribution that ships it (Ray: pip install 'tilecore[ray]'), or fix TILECORE_EXECUTOR",
        )
    return found[name].load()(spec, **options)


class EnvTuneRunner:
    """The executor ``TILECORE_EXECUTOR`` names, offered every autotuning sweep.

    Unset (the default): every sweep stays tilelang's own.  An executor that cannot be
    loaded is one warning per setting and local tuning, never a failed compile."""

    def __init__(self) -> None:
        self._spec: str | None = None
        self._executor: Any = None

    def run(self, job: Any) -> Any | None:
        spec = os.environ.get(EXECUTOR_ENV, "").strip()
        if not spec:
            return None
        if spec != self._spec:
            self._spec, self._executor = spec, None
            try:
                self._executor = load_executor(spec)
            except Exception as err:
                _logger.warning("tilecore: %s=%s cannot be used (%s); tuning locally.", EXECUTOR_ENV, spec, err)
        return None if self._executor is None else self._executor.tune(job)


# One of each per process, however often the bridge is installed (the bridge adds an object once).
REMOTE_TIER, TUNE_RUNNER = RemoteCacheTier(), EnvTuneRunner()


def activate() -> Registry:
    """Import tilelang and connect the registry to it.  Idempotent.

    Raises :class:`tilecore._bridge.BridgeError` if the installed tilelang is
    not one the bridge supports (the message names the supported range).
    """
    import tilelang  # noqa: F401 - the bridge patches the imported package

    from tilecore import _bridge

    _warn_if_forked()  # before the bridge: a fork is the likeliest reason it would refuse this tilelang
    registry = get_registry()
    _bridge.install(registry)
    _bridge.add_tier(REMOTE_TIER)
    _bridge.add_tune_runner(TUNE_RUNNER)
    return registry


@functools.cache
def _warn_if_forked() -> None:
    """Warn once per process when another distribution owns or overwrote the ``tilelang`` package."""
    from tilecore._registry import compat

    problem = compat.fork_problem()
    if problem is not None:
        compat.warn_once(f"{problem}. tilecore cannot vouch for this tilelang. Fix: {compat.fork_fix()}")


def autoload_activate() -> None:
    """Activate without raising: used at import and by the startup hook after ``import tilelang``.

    A broken tilecore or an unsupported tilelang must not break ``import tilelang``;
    the error is logged once, kept in :data:`activation_error`, and an explicit
    :func:`activate` call raises it.
    """
    global activation_error
    try:
        activate()
        activation_error = None
    except Exception as err:
        activation_error = err
        _logger.warning("tilecore could not activate (%s: %s); tilelang runs without plugins.", type(err).__name__, err)


def activate_with_tilelang() -> None:
    """Activate now if tilelang is imported, else right after ``import tilelang``."""
    if "tilelang" in sys.modules:
        autoload_activate()
        return
    try:
        import _tilecore_autoload  # the startup hook module, installed next to the package
    except ImportError:  # a source checkout without the installed hook: activation stays explicit
        return
    _tilecore_autoload.watch()
