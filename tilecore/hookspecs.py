"""The tilecore plugin contract: one hook per concern a backend owns.

A backend is any object (usually a module) with ``@tilecore.hookimpl``
functions named after these specs and a ``tilecore_api_version = "1.1"``
attribute.  tilecore calls every hook except ``tilecore_declare_targets`` only
on the backend that declared the target being compiled (plus plugins whose
declared role is :data:`WRAPPER`, such as tracing wrappers), so an
implementation never needs to check whether ``target`` is its own.

Roles are declared, never inferred: a plugin is a backend unless it sets
``tilecore_role = "wrapper"``.  A backend must implement
``tilecore_declare_targets``; returning ``[]`` (e.g. "no device here") makes it
a backend with no targets, which is loaded, listed and never called for
another backend's targets.  A wrapper declares no targets and sees every
backend's hook calls.

Every value a hook returns is checked by the core (``tilecore._registry.dispatch.RETURNS``); a
wrong type raises :class:`tilecore.errors.HookReturnError` naming the
distribution, version, hook and expected type.

Which hooks a backend must implement:

=======================  ==========================  =========================
hook                     own target (no upstream)    ``Upstream(...)`` target
=======================  ==========================  =========================
declare_targets          required                    required
setup                    optional                    optional
lower                    required                    not called
codegen                  required                    not called
create_adapter           required                    not called
supply_tensor            optional (host default)     optional (device default)
bench                    optional (wall clock)       optional (wall clock)
doctor_target            optional                    optional
=======================  ==========================  =========================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pluggy import HookimplMarker, HookspecMarker

from tilecore.kernel import KernelAdapter, Toolchain
from tilecore.targets import TargetSpec

if TYPE_CHECKING:
    import torch
    from tvm.ir import IRModule
    from tvm.target import Target

    from tilecore.kernel import CompiledKernel, TensorParam
    from tilecore.targets import ResolvedTarget

PROJECT = "tilecore"
hookspec = HookspecMarker(PROJECT)
hookimpl = HookimplMarker(PROJECT)

#: Module attribute a plugin sets to declare its role: ``tilecore_role = "wrapper"``.
ROLE_ATTRIBUTE = "tilecore_role"
BACKEND = "backend"
WRAPPER = "wrapper"
ROLES = (BACKEND, WRAPPER)


@hookspec
def tilecore_declare_targets() -> Sequence[TargetSpec]:  # type: ignore[empty-body]  # a hook specification
    """Return the targets this backend provides.  Must be cheap: no toolchain
    probing here (put that in ``TargetSpec.probe`` or ``tilecore_setup``)."""


@hookspec(firstresult=True)
def tilecore_setup(target: ResolvedTarget) -> Toolchain | None:
    """Find the toolchain/environment for ``target``; called once per target
    before its first compile and by ``tilecore doctor``.  Raise
    :class:`tilecore.ToolchainError` with the fix when something is missing."""


@hookspec(firstresult=True)
def tilecore_lower(target: ResolvedTarget, mod: IRModule, tvm_target: Target) -> IRModule | None:
    """Lower the frontend ``IRModule`` to host + device functions; return the
    lowered module.  Device functions must carry the device calling convention
    (``tilecore.upstream.lower_with_host_pipeline`` does this for you)."""


@hookspec(firstresult=True)
def tilecore_codegen(target: ResolvedTarget, device_mod: IRModule, tvm_target: Target) -> str | None:
    """Turn the lowered device ``IRModule`` into source text (the kernel
    source users see through ``kernel.get_kernel_source()``)."""


@hookspec(firstresult=True)
def tilecore_create_adapter(target: ResolvedTarget, kernel: CompiledKernel) -> KernelAdapter | None:
    """Build (or load, when ``kernel.library_path`` is set) the runtime object
    that launches ``kernel``."""


@hookspec(firstresult=True)
def tilecore_supply_tensor(target: ResolvedTarget, param: TensorParam, supply: str) -> torch.Tensor | None:
    """Make an input tensor for ``param`` on the target's device.  ``supply``
    is one of :data:`tilecore.kernel.SUPPLY_TYPES`."""


@hookspec(firstresult=True)
def tilecore_bench(
    target: ResolvedTarget,
    fn: Callable[[], Any],
    warmup: float,
    rep: float,
    n_warmup: int,
    n_repeat: int,
    backend: str,
) -> float | list[float] | None:
    """Time ``fn`` on the target's device; return milliseconds per call.
    ``warmup``/``rep`` are time budgets in ms and ``n_warmup``/``n_repeat``
    explicit counts that override them when non-zero, as in tilelang's
    ``do_bench``; ``backend`` is the timing method the user asked for
    (tilelang's names: ``"event"`` by default, ``"cudagraph"``, ``"wall"``, ...):
    honour it or raise a :class:`tilecore.TilecoreError` saying which methods
    the target supports.  Returning a list gives every sample (tilecore reduces it)."""


@hookspec(firstresult=True)
def tilecore_doctor_target(spec: TargetSpec) -> str | None:
    """Called by ``tilecore doctor`` (API 1.1) when ``spec`` cannot be resolved with
    its default options, typically because a default detects hardware this
    machine lacks.  Return a target string with explicit options (``"name:value"``)
    that ``doctor`` should check the toolchain with instead; ``doctor`` runs
    ``tilecore_setup`` for it and prints the exact ``tilecore doctor --target ...``
    command.  Return ``None`` when no such choice can be made."""
