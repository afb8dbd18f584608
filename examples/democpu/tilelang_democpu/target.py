"""Target declaration: ``democpu`` with an optimisation-level option."""

from __future__ import annotations

import shutil

from tilecore import Availability, TargetOption, TargetSpec

OPT_LEVELS = ("O0", "O1", "O2", "O3")


def probe() -> Availability:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return Availability.no("no C++ compiler (g++ or c++) on PATH; install one, e.g. apt-get install g++")
    return Availability.yes(f"runs on the host CPU; compiler {compiler}")


TARGET = TargetSpec(
    name="democpu",
    description="example backend: kernels as C on the host CPU (tilelang-democpu)",
    aliases=("democpu-host",),
    options=(TargetOption("opt", "C++ optimisation level", choices=OPT_LEVELS, default="O2"),),
    device="cpu",
    probe=probe,
    priority=-100,  # an example: never preferred by target="auto" over real hardware
    unsupported=frozenset({"bfloat16"}),  # C has no native bf16 arithmetic here
)
