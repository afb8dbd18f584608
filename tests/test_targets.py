"""Target declarations and option binding (no tilelang needed)."""

from __future__ import annotations

import pytest

from tilecore import Availability, PluginValidationError, TargetOption, TargetOptionError, TargetSpec, Upstream
from tilecore.targets import bind_options, split_target_string, target_kind

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
