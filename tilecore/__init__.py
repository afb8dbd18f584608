"""tilecore: hardware backends for TileLang as installable plugins.

Activation connects the plugin registry to tilelang, so
``tilelang.compile(f, target="<name>")`` resolves targets declared by installed
backends.  It happens right after ``import tilelang`` (the startup hook
installed with the distribution, unless ``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``),
or explicitly with :func:`activate`.

``import tilecore`` itself is cheap: it imports neither tilelang nor torch.  It
activates at once only if tilelang is already imported; otherwise it makes sure
the next ``import tilelang`` activates (also under ``python -S`` or with
autoload disabled, where no startup hook runs).

Backend authors use :data:`hookimpl`, :class:`TargetSpec`, :class:`TargetOption`,
:class:`Upstream`, :class:`Availability`, :class:`Toolchain` and the hook
contract in :mod:`tilecore.hookspecs`.
"""

from __future__ import annotations

import logging
import sys
import threading

from tilecore._version import API_VERSION, __version__
from tilecore.errors import (
    AmbiguousTargetError,
    BackendLoadError,
    IncompatibleBackendError,
    KernelArgumentError,
    PluginValidationError,
    TargetOptionError,
    TilecoreError,
    ToolchainError,
    UnknownTargetError,
)
from tilecore.hookspecs import hookimpl, hookspec
from tilecore.kernel import SUPPLY_TYPES, CompiledKernel, KernelAdapter, TensorParam, Toolchain
from tilecore.registry import Backend, Registry
from tilecore.targets import Availability, ResolvedTarget, TargetOption, TargetSpec, Upstream

__all__ = [
    "API_VERSION",
    "SUPPLY_TYPES",
    "AmbiguousTargetError",
    "Availability",
    "Backend",
    "BackendLoadError",
    "CompiledKernel",
    "IncompatibleBackendError",
    "KernelAdapter",
    "KernelArgumentError",
    "PluginValidationError",
    "Registry",
    "ResolvedTarget",
    "TargetOption",
    "TargetOptionError",
    "TargetSpec",
    "TensorParam",
    "TilecoreError",
    "Toolchain",
    "ToolchainError",
    "UnknownTargetError",
    "Upstream",
    "__version__",
    "activate",
    "get_registry",
    "hookimpl",
    "hookspec",
    "register",
    "require_toolchain",
    "resolve_target",
    "setup_target",
]

_logger = logging.getLogger("tilecore")
_registry: Registry | None = None
_registry_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry (created on first use; reads the environment then)."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                from tilecore._bridge import builtin_kinds

                _registry = Registry(builtin_kinds=builtin_kinds)
    return _registry


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
    return registry


_fork_checked = False


def _warn_if_forked() -> None:
    """Warn once per process when another distribution owns or overwrote the ``tilelang`` package."""
    global _fork_checked
    if _fork_checked:
        return
    _fork_checked = True
    from tilecore import compat

    problem = compat.fork_problem()
    if problem is not None:
        compat.warn_once(f"{problem}. tilecore cannot vouch for this tilelang. Fix: {compat.fork_fix()}")


def register(plugin: object, name: str | None = None) -> Backend:
    """Register an in-process backend object (a module or instance with hook implementations).

    Unlike entry-point backends, errors raise immediately.
    """
    registry = activate()
    return registry.register(plugin, name)


def resolve_target(target: object) -> ResolvedTarget | None:
    """Resolve ``"acme"``, ``"acme:x2"`` or ``{"kind": "acme", ...}`` to a declared target.

    Returns ``None`` for a tilelang built-in kind no backend declares.
    """
    registry = get_registry()
    if target == "auto":
        return registry.select_auto()
    return registry.resolve(target)  # type: ignore[arg-type]


def setup_target(target: object) -> Toolchain | None:
    """Run (once) and return the setup hook's result for ``target``."""
    resolved = resolve_target(target)
    if resolved is None:
        raise UnknownTargetError(f"{target!r} is not a tilecore target")
    return get_registry().setup(resolved)


def require_toolchain(target: object) -> Toolchain:
    """:func:`setup_target` for a backend that implements the setup hook: never ``None``.

    Backends call this from their own hooks, where a missing toolchain is a bug to report,
    not a case to handle.  Raises :class:`ToolchainError` (naming the target and the
    backend's distribution) if the backend has no ``tilecore_setup`` hook.
    """
    toolchain = setup_target(target)
    if toolchain is None:
        resolved = resolve_target(target)
        owner = f" of {resolved.distribution} {resolved.version}" if resolved is not None else ""
        raise ToolchainError(
            f"target {target!r}: backend{owner} implements no tilecore_setup hook, so it has no toolchain.",
            fix="implement tilecore_setup in the backend, or call tilecore.setup_target(), which returns None then.",
        )
    return toolchain


#: Why the last activation failed (shown by ``tilecore list``/``doctor``), or ``None``.
activation_error: BaseException | None = None


def _autoload_activate() -> None:
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


def _activate_with_tilelang() -> None:
    """Activate now if tilelang is imported, else right after ``import tilelang``."""
    if "tilelang" in sys.modules:
        _autoload_activate()
        return
    try:
        import _tilecore_autoload  # the startup hook module, installed next to the package
    except ImportError:  # a source checkout without the installed hook: activation stays explicit
        return
    _tilecore_autoload.watch()


_activate_with_tilelang()
