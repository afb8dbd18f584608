"""Target declarations: what a backend says it can compile for.

A backend returns :class:`TargetSpec` objects from ``tilecore_declare_targets``.
Specs are frozen and validated when built, like tilelang's ``BackendModule``
manifests, so a malformed declaration fails in the backend that made it and
never half-registers.  Hooks receive a :class:`ResolvedTarget` (the spec plus a
complete, validated option mapping), never raw strings; the target-string
grammar lives in the machinery (``tilecore._registry.options``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tilecore.errors import Owner, PluginValidationError, choices_text

_NAME_RE = re.compile(r"[a-z][a-z0-9_\-]*", re.ASCII)


def is_target_name(text: str) -> bool:
    """Whether ``text`` is a valid target name: lower-case ASCII letters, digits, ``_``, ``-``."""
    return _NAME_RE.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a target can run kernels on this machine, and why (not)."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def yes(cls, reason: str) -> Availability:
        return cls(True, reason)

    @classmethod
    def no(cls, reason: str) -> Availability:
        return cls(False, reason)


@dataclass(frozen=True, slots=True)
class TargetOption:
    """One option of a target, such as a chip or an architecture.

    ``default`` is a value or a zero-argument callable (for detection, e.g. the
    local GPU's arch); it is called at most once per resolution.  A value is
    accepted when it is in ``choices`` or, if given, matches ``pattern``; an
    option with neither accepts any non-empty string.
    """

    name: str
    doc: str
    choices: tuple[str, ...] = ()
    default: str | Callable[[], str] | None = None
    pattern: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not is_target_name(self.name):
            raise PluginValidationError(f"target option name {self.name!r} must match {_NAME_RE.pattern}")
        object.__setattr__(self, "choices", tuple(self.choices))
        for choice in self.choices:
            if not isinstance(choice, str) or not choice.isascii():
                raise PluginValidationError(f"target option {self.name!r}: choice {choice!r} must be an ASCII string")
        if self.pattern is not None:
            re.compile(self.pattern, re.ASCII)

    def accepts(self, value: str) -> bool:
        if not isinstance(value, str) or not value.isascii():
            return False
        if value in self.choices:
            return True
        if self.pattern is not None:
            return re.fullmatch(self.pattern, value, re.ASCII) is not None
        return not self.choices and bool(value)

    def describe_valid(self) -> str:
        parts = []
        if self.choices:
            parts.append(choices_text(self.choices))
        if self.pattern is not None:
            parts.append(f"values matching /{self.pattern}/")
        return " or ".join(parts) if parts else "any non-empty string"

    def default_value(self) -> str | None:
        return self.default() if callable(self.default) else self.default


@dataclass(frozen=True, slots=True)
class Upstream:
    """Delegate a target to one of tilelang's built-in backends.

    Setting ``TargetSpec(upstream=Upstream("<tvm kind>"))`` is the one-line choice a
    backend makes to say: tilelang's own lowering, codegen and execution
    adapters handle this target; this backend contributes the target name,
    option validation, setup, tensor supply and profiling.  ``attrs`` maps the
    resolved options to the TVM target attributes upstream expects;
    ``options_from_attrs`` is its inverse, needed when an option is stored
    under another attribute name (an ``arch`` option stored as TVM's ``mcpu``), so a TVM
    target built by upstream maps back to the same resolved target.
    """

    kind: str
    attrs: Callable[[Mapping[str, str]], Mapping[str, Any]] | None = None
    options_from_attrs: Callable[[Mapping[str, Any]], Mapping[str, str]] | None = None

    def tvm_config(self, options: Mapping[str, str]) -> dict[str, Any]:
        config: dict[str, Any] = {"kind": self.kind}
        if self.attrs is not None:
            config.update(self.attrs(options))
        return config


def _always_available() -> Availability:
    return Availability.yes("no probe declared")


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a target's benchmarks may run, for an executor that spreads autotuning (optional).

    ``per``: ``"host"`` (the default: one benchmark slot per machine, e.g. an emulator or a CPU
    target, whose timings every benchmark on the host disturbs) or ``"device"`` (one slot per
    device; ``devices`` counts this machine's, e.g. through the torch device module's ``device_count``).
    ``exclusive``: a benchmark has its slot to itself (the default); ``False`` when timings do not
    depend on what else runs (e.g. counted cycles of a simulator), so benchmarks may overlap.
    """

    per: str = "host"
    exclusive: bool = True
    devices: Callable[[], int] | None = None

    def __post_init__(self) -> None:
        if self.per not in ("host", "device"):
            raise PluginValidationError(f"Placement(per={self.per!r}): use 'host' or 'device'")


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """A target a backend declares.

    Parameters
    ----------
    name:
        Canonical name users pass as ``target=`` (lower case).
    description:
        One line shown by ``tilecore list``.
    aliases:
        Other names that resolve to this target.
    options:
        Options in declaration order.  The first one is positional:
        ``"name:value"`` sets it.
    device:
        The torch device string of tensors the target's kernels take, or a
        callable of the resolved options returning it (``"cpu"`` for a target
        whose adapter copies host tensors in and out).
    probe:
        Zero-argument callable saying whether the target can run here.  It must
        be cheap and must not raise; tilecore records any exception as "not
        available".
    priority:
        Higher wins for ``target="auto"`` among available targets.
    upstream:
        See :class:`Upstream`.  ``None`` means this backend implements
        lowering, codegen and the adapter itself through hooks.
    unsupported:
        Names of language constructs the target does not support yet (for
        example ``"gemm"``); the conformance suite reports those cases as
        unsupported instead of failed.
    replaces_builtin:
        The explicit opt-in to take over a target kind tilelang compiles by
        itself (its TVM kinds, e.g. ``"c"``).  Without it, declaring such a name
        is a load-time validation error; with it, the distribution must also
        list the name in its ``tilecore.targets`` metadata, so every process
        agrees on the owner before anything is imported.
    placement:
        Where the target's benchmarks may run (:class:`Placement`); the default,
        one exclusive slot per host, suits every target.
    """

    name: str
    description: str
    aliases: tuple[str, ...] = ()
    options: tuple[TargetOption, ...] = ()
    device: str | Callable[[Mapping[str, str]], str] = "cpu"
    probe: Callable[[], Availability] = _always_available
    priority: int = 0
    upstream: Upstream | None = None
    unsupported: frozenset[str] = field(default_factory=frozenset)
    replaces_builtin: bool = False
    placement: Placement = Placement()

    def __post_init__(self) -> None:
        for name in (self.name, *self.aliases):
            if not isinstance(name, str) or not is_target_name(name):
                raise PluginValidationError(
                    f"target name {name!r} is not valid: use lower-case letters, digits, '_' or '-', starting with a letter"
                )
        object.__setattr__(self, "aliases", tuple(self.aliases))
        object.__setattr__(self, "options", tuple(self.options))
        object.__setattr__(self, "unsupported", frozenset(self.unsupported))
        if len(set((self.name, *self.aliases))) != 1 + len(self.aliases):
            raise PluginValidationError(f"target {self.name!r} repeats a name among its aliases {self.aliases}")
        option_names = [opt.name for opt in self.options]
        if len(set(option_names)) != len(option_names):
            raise PluginValidationError(f"target {self.name!r} declares option names twice: {option_names}")
        if "kind" in option_names:
            raise PluginValidationError(f"target {self.name!r}: 'kind' is reserved and cannot be an option name")
        if not callable(self.probe):
            raise PluginValidationError(f"target {self.name!r}: probe must be callable")

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def option(self, name: str) -> TargetOption:
        for opt in self.options:
            if opt.name == name:
                return opt
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """A declared target with every option resolved and validated.

    ``backend``, ``distribution`` and ``version`` identify the backend that
    declared it; errors and cache keys use them.
    """

    spec: TargetSpec
    options: Mapping[str, str]
    backend: str
    distribution: str
    version: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def device(self) -> str:
        device = self.spec.device
        return device(self.options) if callable(device) else device

    @property
    def owner(self) -> str:
        """``"distribution version"``, as shown in error messages."""
        return f"{self.distribution} {self.version}"

    @property
    def error_owner(self) -> Owner:
        """The :class:`~tilecore.errors.Owner` of an error about this target (``owner=`` of any tilecore error)."""
        return Owner(self.distribution, self.version, target=str(self), backend=self.backend)

    def __getitem__(self, option: str) -> str:
        return self.options[option]

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.name, **self.options}

    def __str__(self) -> str:
        if not self.options:
            return self.name
        opts = ",".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.name}:{opts}"

    def __hash__(self) -> int:
        return hash((self.spec.name, self.backend, tuple(self.options.items())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResolvedTarget):
            return NotImplemented
        return (self.spec.name, self.backend, dict(self.options)) == (other.spec.name, other.backend, dict(other.options))
