"""Conformance cases: the target declaration and the setup hook."""

from __future__ import annotations

import warnings

import pytest
import torch

import tilecore
from tilecore._registry import probe
from tilecore.conformance.constructs import CONSTRUCTS


def test_declaration(tilecore_target_text: str) -> None:
    """The target resolves to a well-formed spec from an identifiable backend."""
    resolved = tilecore.resolve_target(tilecore_target_text)
    assert resolved is not None, f"{tilecore_target_text!r} is a tilelang built-in kind, not a tilecore target"
    spec = resolved.spec
    assert isinstance(spec, tilecore.TargetSpec), f"spec is {type(spec).__name__}, not tilecore.TargetSpec"
    assert spec.description.strip(), f"target {spec.name!r} has an empty description (shown by `tilecore list`)"
    assert resolved.distribution and not resolved.distribution.startswith("<"), (
        f"target {spec.name!r} comes from {resolved.distribution!r}: install the backend as a distribution with an entry point"
    )
    assert resolved.version and resolved.version != "?", f"distribution {resolved.distribution!r} has no version"
    backend = tilecore.get_registry().backend_of(resolved)
    assert backend.api_version is not None, f"{backend.label} declares no tilecore_api_version"
    assert int(backend.api_version.split(".")[0]) == tilecore.API_VERSION[0]
    try:
        device = torch.device(resolved.device)
    except (RuntimeError, TypeError) as err:
        raise AssertionError(f"target {resolved} declares device {resolved.device!r}, which torch cannot parse: {err}") from err
    assert device.type, device
    for option in spec.options:
        assert option.doc.strip(), f"option {option.name!r} of target {spec.name!r} has no doc"
        value = resolved.options[option.name]
        assert option.accepts(value), f"option {option.name!r}: resolved value {value!r} is not accepted by the option itself"
    availability = spec.probe()
    assert isinstance(availability, tilecore.Availability), (
        f"probe of {spec.name!r} returned {availability!r}; it must return tilecore.Availability"
    )
    assert availability.reason.strip(), f"probe of {spec.name!r} gives no reason"
    unknown = sorted(set(spec.unsupported) - set(CONSTRUCTS))
    if unknown:
        warnings.warn(
            f"TargetSpec.unsupported of {spec.name!r} names {unknown}, which no conformance case uses; "
            f"known constructs: {', '.join(CONSTRUCTS)}",
            stacklevel=1,
        )


def test_target_forms(tilecore_target: tilecore.ResolvedTarget) -> None:
    """Every spelling of the target resolves to the same target."""
    spec = tilecore_target.spec
    assert tilecore.resolve_target(str(tilecore_target)) == tilecore_target, f"{str(tilecore_target)!r} does not round-trip"
    assert tilecore.resolve_target(tilecore_target.as_dict()) == tilecore_target, "the dict form does not round-trip"
    for alias in spec.aliases:
        other = tilecore.resolve_target(alias)
        assert other is not None and other.spec is spec, f"alias {alias!r} resolves to {other}"


def test_option_errors(tilecore_target: tilecore.ResolvedTarget) -> None:
    """Bad option values are refused with an error naming the target, its owner and the valid values."""
    spec = tilecore_target.spec
    checked = 0
    for option in spec.options:
        if not option.choices:
            continue
        bad = "no-such-value-9"
        assert not option.accepts(bad)
        with pytest.raises(tilecore.TargetOptionError) as caught:
            tilecore.resolve_target({"kind": spec.name, option.name: bad})
        message = str(caught.value)
        assert spec.name in message and tilecore_target.distribution in message, message
        assert any(choice in message for choice in option.choices), f"error lists no valid {option.name}: {message}"
        checked += 1
    if spec.upstream is None:
        with pytest.raises(tilecore.TargetOptionError) as caught:
            tilecore.resolve_target({"kind": spec.name, "no_such_option": "1"})
        assert spec.name in str(caught.value), str(caught.value)
        checked += 1
    if not checked:
        pytest.skip(f"target {spec.name!r} has no option with choices and passes unknown options upstream")


def test_setup_toolchain(tilecore_target_text: str, tilecore_target: tilecore.ResolvedTarget) -> None:
    """The setup hook reports the toolchain it found, once per target."""
    toolchain = tilecore.setup_target(tilecore_target_text)
    if toolchain is None:
        pytest.skip(f"{tilecore_target.owner} implements no tilecore_setup (optional): nothing to report")
    assert isinstance(toolchain, tilecore.Toolchain), f"tilecore_setup returned {type(toolchain).__name__}, not tilecore.Toolchain"
    for name in ("name", "version", "location", "found_by", "fingerprint"):
        value = getattr(toolchain, name)
        assert isinstance(value, str) and value.strip(), f"Toolchain.{name} is {value!r}; it must say what was found"
    assert tilecore.setup_target(tilecore_target_text) is toolchain, "setup ran twice for one target (tilecore caches it)"
    if probe(tilecore_target.spec):
        assert toolchain.location, toolchain
