"""Codegen: upstream's C device codegen; the source is what users see as kernel source."""

from __future__ import annotations

from typing import Any

from tilecore.upstream import c_source


def generate(device_mod: Any, tvm_target: Any) -> str:
    return c_source(device_mod, tvm_target)
