"""Finding the host C or C++ compiler a backend builds or links kernel libraries with.

The rule is the one build systems use: ``$CC`` / ``$CXX`` when set (and then
*only* that one: a compiler the user named but that is missing is an error,
never a silent switch to another), else the first of the usual names on
``PATH``.  The version banner is read once per compiler path and process.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from typing import Literal

from tilecore.errors import Owner, ToolchainError
from tilecore.kernel import Toolchain
from tilecore.kit.tools import run_tool

Language = Literal["c", "c++"]

#: Environment variable and PATH candidates per language, in order (the first is also the package to install).
ENV_VAR: dict[str, str] = {"c": "CC", "c++": "CXX"}
CANDIDATES: dict[str, tuple[str, ...]] = {"c": ("gcc", "cc", "clang"), "c++": ("g++", "c++", "clang++")}


@dataclass(frozen=True)
class HostCompiler:
    """A located host compiler."""

    language: str
    path: str
    version: str
    found_by: str

    def as_toolchain(self) -> Toolchain:
        """The record ``tilecore_setup`` returns for a backend whose toolchain is this compiler."""
        return Toolchain(name=self.language, version=self.version, location=self.path, found_by=self.found_by)


@functools.lru_cache(maxsize=16)
def _banner(path: str) -> str:
    run = run_tool([path, "--version"], timeout=30)
    lines = run.stdout.splitlines() if run.returncode is not None else []
    return lines[0].strip() if lines else "unknown"


def find_host_compiler(language: Language, where: Owner | str | None = None) -> HostCompiler:
    """The host compiler for ``language``; ``where`` (e.g. ``target.error_owner``) owns the errors
    (by default the registry names the backend whose hook called this).

    Raises :class:`ToolchainError` naming what was looked for and the fix.
    """
    variable = ENV_VAR[language]
    explicit = os.environ.get(variable)
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise ToolchainError.about(
                where,
                f"builds kernels with the host {language} compiler ${variable}={explicit!r}, which is not an "
                f"executable on PATH. Point {variable} at an installed compiler, or unset it to use "
                f"{', '.join(CANDIDATES[language])}.",
            )
        return HostCompiler(language, found, _banner(found), f"${variable}")
    for name in CANDIDATES[language]:
        found = shutil.which(name)
        if found is not None:
            return HostCompiler(language, found, _banner(found), f"PATH ({name})")
    raise ToolchainError.about(
        where,
        f"builds kernels with a host {language} compiler and found none (${variable} is not set; none of "
        f"{', '.join(CANDIDATES[language])} on PATH). Install one (apt-get install {CANDIDATES[language][0]}) or set {variable}.",
    )


__all__ = ["HostCompiler", "find_host_compiler"]
