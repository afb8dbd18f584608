"""Hook dispatch: calling one backend's hooks, checking what they return, caching setup.

Hooks are called through pluggy's subset callers, so a backend's hook runs for its own
targets only (plus wrapper plugins).  Every value a hook returns is checked against
:data:`RETURNS` at this boundary; an exception that is not a :class:`TilecoreError` becomes
a :class:`BackendLoadError` naming the backend and hook; one that is gets the target as its
:attr:`~tilecore.errors.TilecoreError.owner` unless it has one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tilecore import hookspecs
from tilecore._registry import messages
from tilecore._registry.table import BackendTable
from tilecore.errors import Owner, TilecoreError
from tilecore.kernel import KernelAdapter, Toolchain
from tilecore.targets import ResolvedTarget, TargetSpec

if TYPE_CHECKING:
    from tilecore._registry.discovery import Backend


@dataclass(frozen=True, slots=True)
class ReturnContract:
    """What a hook may return; ``None`` ("no answer") is always allowed for firstresult hooks."""

    expected: str
    check: Callable[[object], bool]


def _is_spec_list(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(item, TargetSpec) for item in value)


def _is_instance_of_loaded(module: str, attribute: str) -> Callable[[object], bool]:
    """``isinstance`` against a class of a module that is already imported (never imports it:
    a value of that type cannot exist unless its module is loaded)."""

    def check(value: object) -> bool:
        owner = sys.modules.get(module)
        cls = getattr(owner, attribute, None) if owner is not None else None
        return cls is not None and isinstance(value, cls)

    return check


def _is_milliseconds(value: object) -> bool:
    def number(item: object) -> bool:
        return isinstance(item, (int, float)) and not isinstance(item, bool)

    if isinstance(value, list):
        return bool(value) and all(number(item) for item in value)
    return number(value)


RETURNS: Mapping[str, ReturnContract] = {
    "tilecore_declare_targets": ReturnContract("a list of tilecore.TargetSpec (an empty list for no targets)", _is_spec_list),
    "tilecore_setup": ReturnContract("a tilecore.Toolchain or None", lambda v: isinstance(v, Toolchain)),
    "tilecore_lower": ReturnContract("a tvm.IRModule", _is_instance_of_loaded("tvm", "IRModule")),
    "tilecore_codegen": ReturnContract("a str (the kernel source text)", lambda v: isinstance(v, str)),
    "tilecore_create_adapter": ReturnContract(
        "a tilecore.KernelAdapter (a callable with a library_path attribute)", lambda v: isinstance(v, KernelAdapter)
    ),
    "tilecore_supply_tensor": ReturnContract("a torch.Tensor or None", _is_instance_of_loaded("torch", "Tensor")),
    "tilecore_bench": ReturnContract("milliseconds: a float, a non-empty list of floats, or None", _is_milliseconds),
    "tilecore_doctor_target": ReturnContract("a target string or None", lambda v: isinstance(v, str)),
}


def check_return(backend: Backend, hook: str, value: object) -> None:
    """Raise :class:`HookReturnError` unless ``value`` satisfies ``hook``'s return contract."""
    contract = RETURNS.get(hook)
    if contract is None or contract.check(value):
        return
    raise messages.wrong_return(backend, hook, value, contract.expected)


class Dispatcher(BackendTable):
    """Calls the hooks of the table's backends; caches each target's setup.

    A part of :class:`~tilecore._registry.registry.Registry`.
    """

    def _caller(self, backend: Backend, hook: str) -> Any:
        key = (id(backend), hook)
        caller = self.callers.get(key)
        if caller is None:
            # Leave out every other backend, whether it declares targets or not; wrappers stay in every call.
            others = [b.plugin for b in self.entries if b is not backend and b.plugin is not None and b.role != hookspecs.WRAPPER]
            caller = self._pm.subset_hook_caller(hook, others)
            self.callers[key] = caller
        return caller

    def call(self, target: ResolvedTarget, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on the backend owning ``target`` (and wrapper plugins).

        A result of the wrong type raises :class:`HookReturnError`; an exception
        that is not already a :class:`TilecoreError` is re-raised as
        :class:`BackendLoadError` naming the backend and hook, with the original
        chained.
        """
        __tracebackhide__ = True
        return self._invoke(self.backend_of(target), hook, target.error_owner, target, target=target, **kwargs)

    def doctor_target(self, backend: Backend, spec: TargetSpec) -> str | None:
        """The backend's suggestion of explicit options for ``doctor`` (hook ``tilecore_doctor_target``)."""
        result = self._invoke(backend, "tilecore_doctor_target", backend.error_owner, spec.name, spec=spec)
        return None if result is None else str(result)

    def _invoke(self, backend: Backend, hook: str, owner: Owner, about: ResolvedTarget | str, /, **kwargs: Any) -> Any:
        """``backend``'s ``hook``: a :class:`TilecoreError` it raises gets ``owner`` (unless it has one),
        any other exception is :func:`messages.hook_raised` about ``about``; the result is checked.
        Positional-only: a hook's own arguments (``tilecore_bench``'s ``backend``) pass through ``kwargs``."""
        __tracebackhide__ = True
        try:
            result = self._caller(backend, hook)(**kwargs)
        except TilecoreError as err:
            raise err.attribute(owner) from err.__cause__
        except Exception as err:
            where = f"target {about}" if isinstance(about, ResolvedTarget) else repr(about)
            raise messages.hook_raised(backend, hook, where, err) from err
        if result is not None:
            check_return(backend, hook, result)
        return result

    def setup(self, target: ResolvedTarget) -> Toolchain | None:
        """Run the setup hook once per resolved target; failures are not cached."""
        cached = self._setups.get(target)
        if cached is not None:
            return cached
        with self.lock:
            cached = self._setups.get(target)
            if cached is None:
                cached = self.call(target, "tilecore_setup")
                if cached is not None:
                    self._setups[target] = cached
            return cached
