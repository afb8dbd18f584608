"""The one libstdc++ header set ppl-compile parses a kernel with.

``ppl-compile`` 1.30.2 embeds clang 17.  Its driver adds the libstdc++ headers of the newest GCC
it finds under ``/usr/lib/gcc/x86_64-linux-gnu/N`` (``/usr/include/c++/N``, the target folder
``/usr/include/x86_64-linux-gnu/c++/N`` that holds ``bits/c++config.h``, ``c++/N/backward``) as
system folders.  ppl-compile itself adds, ahead of them, whichever of ``/usr/include/c++/11``,
``/usr/include/x86_64-linux-gnu/c++/11`` and ``/usr/include/c++/12`` exist (hard-coded in the
binary; seen with ``strace``).  On a host with GCC 12 and 13 headers and no ``c++/11`` (Ubuntu
24.04), ``<type_traits>`` came from ``/usr/include/c++/12`` and ``<bits/c++config.h>`` from GCC
13's target folder: every kernel failed to compile (exit status 19).

So the backend puts one complete set in front, as ``-I`` folders (searched before all of those):
the version whose ``/usr/include/c++/N`` ppl-compile adds by itself (11, else 12: the set that
folder belongs to), else the newest complete one on the host.  Where that folder's set is
incomplete (no target folder) or the host has no complete set, :func:`cxx_include_dirs` raises
a :class:`~tilecore.ToolchainError` naming the package to install.
"""

from __future__ import annotations

from pathlib import Path

from tilecore import ToolchainError
from tilelang_tpu.chips import error_owner

__all__ = ["HARD_CODED_VERSIONS", "TRIPLE", "cxx_include_dirs"]

#: The ``/usr/include/c++/N`` folders ppl-compile 1.30.2 adds by itself, in its order.
HARD_CODED_VERSIONS = ("11", "12")
#: The host triple of the target folders ppl-compile and its clang use (the emulator is x86-64).
TRIPLE = "x86_64-linux-gnu"


def _complete(root: Path, version: str) -> bool:
    return (root / "c++" / version).is_dir() and (root / TRIPLE / "c++" / version / "bits" / "c++config.h").is_file()


def _set(root: Path, version: str) -> tuple[Path, ...]:
    headers = root / "c++" / version
    return headers, root / TRIPLE / "c++" / version, headers / "backward"


def _numeric(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".")) if all(p.isdigit() for p in name.split(".")) else ()


def cxx_include_dirs(root: Path = Path("/usr/include")) -> tuple[Path, ...]:
    """The libstdc++ folders (headers, target folder, ``backward``) to pass to ppl-compile as
    ``-I``, in order: one version's complete set (see the module docstring).  ``root`` is the
    system include folder (a test points it elsewhere)."""
    chosen = _choose(root)
    stray = root / TRIPLE / "c++" / HARD_CODED_VERSIONS[0]
    if stray.is_dir() and not (root / "c++" / HARD_CODED_VERSIONS[0]).is_dir() and stray.resolve() != chosen[1].resolve():
        # ppl-compile adds it ahead of the host's system folders, and clang drops a -I folder that is also
        # a system folder: where the chosen set is the host's own, this c++config.h would win.
        raise ToolchainError(
            f"{stray} exists without {root / 'c++' / HARD_CODED_VERSIONS[0]}: ppl-compile 1.30.2 always searches it, so "
            f"its bits/c++config.h would be mixed with the libstdc++ {chosen[0].name} headers and tpu kernels could fail "
            "to compile.",
            fix=f"remove {stray} (a symlink left by an earlier workaround?), or install libstdc++-{HARD_CODED_VERSIONS[0]}-dev",
            owner=error_owner(),
        )
    return chosen


def _choose(root: Path) -> tuple[Path, ...]:
    for version in HARD_CODED_VERSIONS:
        if not (root / "c++" / version).is_dir():
            continue
        if not _complete(root, version):
            target = root / TRIPLE / "c++" / version
            raise ToolchainError(
                f"{root / 'c++' / version} exists, and ppl-compile 1.30.2 always searches it before the C++ headers of the "
                f"host's newest GCC, but its target folder {target} (bits/c++config.h) is missing: clang would mix two "
                "libstdc++ versions and every tpu kernel would fail to compile.",
                fix=f"install the complete set (`apt-get install libstdc++-{version}-dev`), or remove the partial {root / 'c++' / version}",
                owner=error_owner(),
            )
        return _set(root, version)
    versions = sorted((p.name for p in (root / "c++").glob("*") if _numeric(p.name) and _complete(root, p.name)), key=_numeric)
    if not versions:
        raise ToolchainError(
            f"no complete libstdc++ header set under {root} (c++/N with {TRIPLE}/c++/N/bits/c++config.h): ppl-compile "
            "parses the PPL headers as C++ and needs one.",
            fix="install GCC's C++ headers (`apt-get install g++`, or `libstdc++-12-dev`)",
            owner=error_owner(),
        )
    return _set(root, versions[-1])
