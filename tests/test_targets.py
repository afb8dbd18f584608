"""Target declarations and option binding (no tilelang needed)."""

from __future__ import annotations

import pytest

from tilecore import Availability, PluginValidationError, TargetOption, TargetOptionError, TargetSpec, Upstream
from tilecore._registry.options import bind_options, split_target_string, target_kind

CHIP = TargetOption("chip", "the chip", choices=("bm1690", "bm1684x"), default="bm1690")
MODE = TargetOption("mode", "execution mode", choices=("pcie", "cmodel"), default=lambda: "cmodel")
SPEC = TargetSpec("tpu", "test", aliases=("sophgo",), options=(CHIP, MODE))


def test_split_forms() -> None:
    assert split_target_string("tpu") == ("tpu", {})
    assert split_target_string("TPU:bm1684x") == ("tpu", {"": "bm1684x"})
    assert split_target_string("tpu:bm1684x,mode=pcie") == ("tpu", {"": "bm1684x", "mode": "pcie"})
    assert target_kind({"kind": "tpu", "chip": "x"}) == "tpu"
    assert target_kind(42) is None


def test_bind_defaults_and_positional() -> None:
    assert bind_options(SPEC, {}, owner="d 1", passthrough=False)[0] == {"chip": "bm1690", "mode": "cmodel"}
    assert bind_options(SPEC, {"": "bm1684x"}, owner="d 1", passthrough=False)[0] == {"chip": "bm1684x", "mode": "cmodel"}
    assert bind_options(SPEC, {"chip": "bm1684x", "mode": "pcie"}, owner="d 1", passthrough=False)[0]["mode"] == "pcie"


def test_bad_option_value_lists_choices() -> None:
    with pytest.raises(TargetOptionError) as info:
        bind_options(SPEC, {"chip": "bm9999"}, owner="tilelang-tpu 0.1.0", passthrough=False)
    text = str(info.value)
    assert "bm9999" in text and "bm1684x, bm1690" in text and "tilelang-tpu 0.1.0" in text


def test_unknown_option_refused_unless_passthrough() -> None:
    with pytest.raises(TargetOptionError, match="no option"):
        bind_options(SPEC, {"speed": "fast"}, owner="d 1", passthrough=False)
    options, extra = bind_options(SPEC, {"speed": "fast"}, owner="d 1", passthrough=True)
    assert extra == {"speed": "fast"} and options["chip"] == "bm1690"


def test_pattern_option() -> None:
    arch = TargetOption("arch", "sm arch", pattern=r"sm_\d+[af]?", default="sm_90a")
    spec = TargetSpec("gpu", "test", options=(arch,), upstream=Upstream("cuda", lambda o: {"arch": o["arch"]}))
    assert bind_options(spec, {"": "sm_80"}, owner="d 1", passthrough=True)[0] == {"arch": "sm_80"}
    with pytest.raises(TargetOptionError, match="values matching"):
        bind_options(spec, {"": "ampere"}, owner="d 1", passthrough=True)
    assert spec.upstream is not None and spec.upstream.tvm_config({"arch": "sm_80"}) == {"kind": "cuda", "arch": "sm_80"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "Bad Name", "description": ""},
        {"name": "x", "description": "", "aliases": ("x",)},
        {"name": "x", "description": "", "options": (CHIP, CHIP)},
        {"name": "x", "description": "", "options": (TargetOption("kind", "reserved"),)},
    ],
)
def test_malformed_specs_are_refused(kwargs: dict) -> None:
    with pytest.raises(PluginValidationError):
        TargetSpec(**kwargs)


def test_availability_is_truthy() -> None:
    assert Availability.yes("ok") and not Availability.no("because")


# -- malformed input (issue 11 item 8) ---------------------------------------------------------

import random  # noqa: E402

from tilecore._registry.options import raw_options  # noqa: E402
from tilecore.errors import MalformedTargetError, TilecoreError  # noqa: E402


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("tpu:bm1690,bm1684x", "two values without a name"),
        ("tpu:chip=bm1690,chip=bm1684x", "option 'chip' twice"),
        ("tpu:=bm1690", "no option name"),
        ("cuda:sm_\u0669\u0660", "non-ASCII"),
    ],
)
def test_malformed_strings(text: str, match: str) -> None:
    with pytest.raises(MalformedTargetError, match=match):
        split_target_string(text)


def test_malformed_dicts() -> None:
    with pytest.raises(MalformedTargetError, match="option key 1 of type int"):
        raw_options({"kind": "tpu", 1: "x"})
    with pytest.raises(MalformedTargetError, match="'kind' that is a string"):
        target_kind({"kind": 7})
    with pytest.raises(MalformedTargetError, match="must be a string"):
        bind_options(SPEC, {"chip": 1690}, owner="d 1", passthrough=False)


def test_patterns_are_ascii_only() -> None:
    arch = TargetOption("arch", "sm arch", pattern=r"sm_\d+")
    assert arch.accepts("sm_90") and not arch.accepts("sm_\u0669\u0660") and not arch.accepts("sm_\uff19\uff10")


def test_default_that_its_option_refuses_is_reported() -> None:
    bad = TargetSpec("x", "t", options=(TargetOption("chip", "c", choices=("a",), default=lambda: "zz"),))
    with pytest.raises(TargetOptionError, match="bug in the backend"):
        bind_options(bad, {}, owner="d 1", passthrough=False)


ALPHABET = "abcz019_-:,=  \t\u0669\uff10\u00e9/{}'\"kindchiptpu"


def random_target(rng: random.Random) -> object:
    if rng.random() < 0.5:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 16)))
    keys: list[object] = ["kind", "chip", "mode", "", "KIND", 1, None, 2.5, ("t",), "\u0669"]
    values: list[object] = ["tpu", "sophgo", "bm1690", "bm1684x", "pcie", "", 7, None, ["x"], "\u0669", "cmodel"]
    return {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 4))}


def test_fuzz_parser_raises_only_tilecore_errors() -> None:
    """10,000 seeded random strings and dicts: each resolves, is left to tilelang (None), or
    raises a TilecoreError; never TypeError/KeyError/... from the parser or error rendering."""
    from tilecore._registry import Registry
    from tilecore._registry.discovery import PluginPolicy

    registry = Registry(PluginPolicy.from_env({"TILECORE_PLUGINS": "nothing-installed"}), builtin_kinds=lambda: ("c",))
    from types import ModuleType

    from tilecore import hookimpl

    @hookimpl
    def tilecore_declare_targets():
        return [SPEC]

    plugin = ModuleType("fuzzplugin")
    plugin.tilecore_api_version = "1.0"
    plugin.tilecore_declare_targets = tilecore_declare_targets
    registry.register(plugin)
    rng = random.Random(20261123)
    outcomes = {"resolved": 0, "none": 0, "error": 0}
    for _ in range(10_000):
        target = random_target(rng)
        try:
            result = registry.resolve(target)  # type: ignore[arg-type]
        except TilecoreError as err:
            assert str(err), target
            outcomes["error"] += 1
            continue
        outcomes["none" if result is None else "resolved"] += 1
    assert all(outcomes.values()), outcomes
