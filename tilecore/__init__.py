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

from tilecore import _activation
from tilecore._activation import activate, get_registry
from tilecore._registry import Backend, Registry
from tilecore._version import API_VERSION, __version__
from tilecore.errors import (
    AmbiguousTargetError,
    BackendLoadError,
    IncompatibleBackendError,
    KernelArgumentError,
    KernelFaultError,
    Owner,
    PluginValidationError,
    TargetOptionError,
    TilecoreError,
    ToolchainError,
    UnknownTargetError,
)
from tilecore.hookspecs import hookimpl, hookspec
from tilecore.kernel import SUPPLY_TYPES, CompiledKernel, KernelAdapter, TensorParam, Toolchain
from tilecore.targets import Availability, Placement, ResolvedTarget, TargetOption, TargetSpec, Upstream

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
    "KernelFaultError",
    "Owner",
    "Placement",
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
        error = ToolchainError(
            f"target {target!r}: backend{owner} implements no tilecore_setup hook, so it has no toolchain.",
            fix="implement tilecore_setup in the backend, or call tilecore.setup_target(), which returns None then.",
        )
        error.owner = resolved.error_owner if resolved is not None else None  # the text names it already
        raise error
    return toolchain


def __getattr__(name: str) -> object:
    # The activation state lives in tilecore._activation; these names stay readable here.
    if name == "activation_error":
        return _activation.activation_error
    raise AttributeError(f"module 'tilecore' has no attribute {name!r}")


_autoload_activate = _activation.autoload_activate  # the startup hook's and tilelang.plugins' entry
_activation.activate_with_tilelang()
