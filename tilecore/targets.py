r"""Target declarations: what a backend says it can compile for.

A backend returns :class:`TargetSpec` objects from ``tilecore_declare_targets``.
Specs are frozen and validated when built, like tilelang's ``BackendModule``
manifests, so a malformed declaration fails in the backend that made it and
never half-registers.

User input (``"acme"``, ``"acme:x2"``, ``{"kind": "acme", "chip": "x2"}``)
is turned into a :class:`ResolvedTarget`: the spec plus a complete, validated
option mapping.  Hooks receive resolved targets, never raw strings.

Parsing is strict: names, option keys and option values are ASCII (patterns
are matched with :data:`re.ASCII`, so ``\d`` never accepts another script's
digits); an option given twice, two positional values, an empty key, a
non-string key or value of a declared option are each a
:class:`~tilecore.errors.MalformedTargetError`.  Nothing is silently dropped or
overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tilecore.errors import MalformedTargetError, PluginValidationError, TargetOptionError, choices_text

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


def split_target_string(text: str) -> tuple[str, dict[str, str]]:
    """Split ``"kind"``, ``"kind:value"`` or ``"kind:a=1,b=2"`` into kind and raw options.

    A bare value (no ``=``) is stored under the key ``""`` and later bound to
    the spec's first option.  Raises :class:`MalformedTargetError` for an
    option given twice, two bare values, an empty option name or non-ASCII text.
    """
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if not text.isascii():
        raise MalformedTargetError(
            f"target {text!r} contains non-ASCII characters; target names and options are ASCII "
            f"(e.g. digits 0-9). Retype it in plain ASCII."
        )
    raw: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        key, value = (key.strip(), value.strip()) if eq else ("", key.strip())
        if eq and not key:
            raise MalformedTargetError(f"target {text!r}: {part!r} has no option name before '='. Write name=value.")
        if key in raw:
            if key:
                raise MalformedTargetError(f"target {text!r} gives option {key!r} twice ({raw[key]!r} and {value!r}); give it once.")
            raise MalformedTargetError(
                f"target {text!r} gives two values without a name ({raw[key]!r} and {value!r}); only the first "
                f"option may be given positionally (e.g. '{kind}:{raw[key]}'); name the others as key=value."
            )
        raw[key] = value
    return kind, raw


def target_kind(target: object) -> str | None:
    """The kind named by a string or dict target, or ``None`` for anything else.

    A dict whose ``kind`` is missing or not a string is malformed (a
    :class:`MalformedTargetError`), as is a string with non-ASCII characters.
    """
    if isinstance(target, str):
        if not target.isascii():
            raise MalformedTargetError(
                f"target {target!r} contains non-ASCII characters; target names and options are ASCII. Retype it in plain ASCII."
            )
        return target.strip().partition(":")[0].strip().lower()
    if isinstance(target, Mapping):
        kind = target.get("kind")
        if not isinstance(kind, str):
            raise MalformedTargetError(
                f"target {_safe_repr(target)} needs a 'kind' that is a string (e.g. {{'kind': 'name', ...}}), got {_safe_repr(kind)}."
            )
        if not kind.isascii():
            raise MalformedTargetError(f"target kind {kind!r} contains non-ASCII characters. Retype it in plain ASCII.")
        return kind.strip().lower()
    return None


def _safe_repr(value: object, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception:  # a user object's __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def raw_options(target: str | Mapping[str, Any]) -> dict[str, Any]:
    """The options a user wrote, with ``kind`` removed; keys are validated (non-empty ASCII strings)."""
    if isinstance(target, str):
        return dict(split_target_string(target)[1])
    options: dict[str, Any] = {}
    for key, value in target.items():
        if not isinstance(key, str):
            raise MalformedTargetError(
                f"target {_safe_repr(target)} has option key {_safe_repr(key)} of type {type(key).__name__}; "
                "option names are strings, e.g. {'kind': 'name', 'option': 'value'}."
            )
        if key == "kind":
            continue
        if not key or not key.isascii():
            raise MalformedTargetError(f"target {_safe_repr(target)} has an invalid option name {key!r}; use a non-empty ASCII name.")
        options[key] = value
    return options


def _default(spec: TargetSpec, opt: TargetOption, owner: str) -> str | None:
    """An option's default, checked: a detection callable that crashes or returns a value its own
    option refuses is the backend's bug, reported as such."""
    try:
        value = opt.default_value()
    except TargetOptionError:
        raise
    except Exception as err:
        raise TargetOptionError(
            f"target {spec.name!r} (from {owner}): choosing a default for option {opt.name!r} raised "
            f"{type(err).__name__}: {err}. Pass it explicitly, e.g. target='{spec.name}:{opt.name}=<value>'. "
            f"Valid values: {opt.describe_valid()}."
        ) from err
    if value is not None and not (isinstance(value, str) and opt.accepts(value)):
        raise TargetOptionError(
            f"target {spec.name!r} (from {owner}): the default of option {opt.name!r} is {_safe_repr(value)}, which the "
            f"option itself does not accept (a bug in the backend). Pass it explicitly. Valid values: {opt.describe_valid()}."
        )
    return value


def bind_options(
    spec: TargetSpec,
    raw: Mapping[str, Any],
    *,
    owner: str,
    passthrough: bool,
) -> tuple[dict[str, str], dict[str, Any]]:
    """Validate ``raw`` against ``spec`` and fill in defaults.

    Returns ``(options, extra)``: the complete option mapping in declaration
    order, and keys the spec does not declare.  ``extra`` is only allowed when
    ``passthrough`` is true (targets delegated upstream may carry TVM target
    attributes); otherwise an unknown key is an error.
    """
    raw = dict(raw)
    if "" in raw:
        if not spec.options:
            raise TargetOptionError(f"target {spec.name!r} (from {owner}) takes no options, but got {raw['']!r}. Use target={spec.name!r}.")
        first = spec.options[0].name
        if first in raw:
            raise TargetOptionError(f"target {spec.name!r}: option {first!r} given twice")
        raw[first] = raw.pop("")
    options: dict[str, str] = {}
    for opt in spec.options:
        if opt.name in raw:
            given = raw.pop(opt.name)
            if not isinstance(given, str):
                raise MalformedTargetError(
                    f"target {spec.name!r} (from {owner}) option {opt.name} must be a string, got {_safe_repr(given)} "
                    f"({type(given).__name__}). Valid {opt.name} values: {opt.describe_valid()}."
                )
            value = given.strip()
            if not opt.accepts(value):
                raise TargetOptionError(
                    f"target {spec.name!r} (from {owner}) does not accept {opt.name}={value!r}. "
                    f"Valid {opt.name} values: {opt.describe_valid()}. {opt.doc}"
                )
        else:
            default = _default(spec, opt, owner)
            if default is None:
                raise TargetOptionError(
                    f"target {spec.name!r} (from {owner}) needs option {opt.name!r} and could not choose one itself. "
                    f"Pass it, e.g. target='{spec.name}:{opt.name}=<value>'. Valid values: {opt.describe_valid()}."
                )
            value = default
        options[opt.name] = value
    if raw and not passthrough:
        valid = choices_text(opt.name for opt in spec.options)
        raise TargetOptionError(f"target {spec.name!r} (from {owner}) has no option(s) {choices_text(raw)}. Valid options: {valid}.")
    return options, raw
