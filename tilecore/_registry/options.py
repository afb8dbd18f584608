r"""The target-string grammar and option binding: user input -> a complete, validated option mapping.

``"acme"``, ``"acme:x2"``, ``"acme:chip=x2,cores=4"`` and ``{"kind": "acme", "chip": "x2"}``
name the same kind of thing.  Parsing is strict: names, option keys and option values are
ASCII (patterns are matched with :data:`re.ASCII`, so ``\d`` never accepts another script's
digits); an option given twice, two positional values, an empty key, a non-string key or
value of a declared option are each a :class:`~tilecore.errors.MalformedTargetError`.
Nothing is silently dropped or overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilecore.errors import MalformedTargetError, TargetOptionError, choices_text
from tilecore.targets import TargetOption, TargetSpec


def split_target_string(text: str) -> tuple[str, dict[str, str]]:
    """Split ``"kind"``, ``"kind:value"`` or ``"kind:a=1,b=2"`` into kind and raw options.

    A bare value (no ``=``) is stored under the key ``""`` and later bound to
    the spec's first option.  Raises :class:`MalformedTargetError` for an
    option given twice, two bare values, an empty option name or non-ASCII text.
    """
    kind = _kind_of(text)
    rest = text.partition(":")[2]
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
        return _kind_of(target)
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


def _kind_of(text: str) -> str:
    """The kind a target string names, lower-cased; a string with non-ASCII characters is malformed."""
    if not text.isascii():
        raise MalformedTargetError(
            f"target {text!r} contains non-ASCII characters; target names and options are ASCII (e.g. digits 0-9). "
            "Retype it in plain ASCII."
        )
    return text.strip().partition(":")[0].strip().lower()


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
