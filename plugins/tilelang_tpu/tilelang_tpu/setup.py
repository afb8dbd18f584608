"""Toolchain setup (the fork's "SophGo env sourcing"): find ppl-compile, its headers and the runtimes.

Sources, in order; the first one that is *present* is used, and if it is
broken that is an error (never a silent fall-through to the next source):

1. ``$PPL_PROJECT_ROOT`` (an absolute path).  If it holds an ``envsetup.sh``,
   that script is sourced by ``bash`` in a subprocess (working directory
   ``$PPL_PROJECT_ROOT``) and the variables it exports are parsed from
   ``env -0``; they are kept in :attr:`TpuToolchain.env` and applied only to
   the processes the backend starts.  Nothing is sourced into this process, and
   nothing is sourced from the current directory.  Without ``envsetup.sh`` the
   directory itself is used (the layout of ``tpu_mlir``'s
   ``cross_toolchains/ppl_compile``).
2. An installed ``tpu_mlir`` distribution, located from its metadata without
   importing any of its Python code, on ``sys.path`` minus the current
   directory (a ``./tpu_mlir/`` is never a toolchain).
3. A toolchain unpacked by ``tilelang-tpu toolchain install`` under
   :func:`install_root` (``$TILELANG_TPU_TOOLCHAIN_DIR``, default
   ``<tilecore cache>/tpu/toolchain``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.machinery
import importlib.metadata
import json
import logging
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tilecore import Toolchain, ToolchainError
from tilecore.kit.paths import cache_root
from tilecore.kit.tools import run_tool
from tilelang_tpu.chips import CHIPS, FALLBACK_CHIP_CODES, TARGET_NAME, error_owner
from tilelang_tpu.cxx_headers import cxx_include_dirs

logger = logging.getLogger("tilelang_tpu")

#: The tpu_mlir release `tilelang-tpu toolchain install` fetches by default.
TOOLCHAIN_WHEEL_VERSION = "1.30.2"
INSTALL_COMMAND = "tilelang-tpu toolchain install"
TOOLCHAIN_DIR_ENV = "TILELANG_TPU_TOOLCHAIN_DIR"

#: Runtime libraries each chip needs to run kernels on the emulator.
RUNTIME_LIBRARIES: Mapping[str, tuple[str, ...]] = {
    "bm1690": ("libtpuv7_rt.so", "libcdm_daemon_emulator.so", "libtpuv7_emulator.so", "libtpuv7_scalar_emulator.so"),
    "bm1684x": ("libbmlib.so", "libcmodel.so", "libcmodel_bm1684x.so"),
}

#: Variables bash sets by itself; never part of what an envsetup.sh exported.
_SHELL_NOISE = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
#: How long an envsetup.sh may run (seconds; ``$TILELANG_TPU_ENVSETUP_TIMEOUT`` overrides).
ENVSETUP_TIMEOUT_ENV = "TILELANG_TPU_ENVSETUP_TIMEOUT"
DEFAULT_ENVSETUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TpuToolchain:
    """A located PPL toolchain: compiler, headers, chip/runtime deps and runtime libraries."""

    ppl_root: Path
    ppl_compile: Path
    version: str
    found_by: str
    library_dirs: tuple[Path, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    #: Problems worth a warning that do not stop the toolchain from working (shown by doctor).
    warnings: tuple[str, ...] = ()

    @property
    def include_dir(self) -> Path:
        return self.ppl_root / "inc"

    @property
    def deps_dir(self) -> Path:
        runtime = self.env.get("PPL_RUNTIME_PATH")
        return Path(runtime) if runtime else self.ppl_root / "deps"

    def chip_code(self, chip: str) -> str:
        """PPL chip code (``--chip``) of ``chip``, from the toolchain's ``chip_map.json`` when present."""
        chip_map = self.deps_dir / "chip" / "chip_map.json"
        if chip_map.is_file():
            mapping = json.loads(chip_map.read_text())
            if chip in mapping:
                return str(mapping[chip])
        return FALLBACK_CHIP_CODES[chip]

    def library(self, name: str) -> Path | None:
        for directory in self.library_dirs:
            candidate = directory / name
            if candidate.is_file():
                return candidate
        return None

    def missing_libraries(self, chip: str) -> list[str]:
        return [name for name in RUNTIME_LIBRARIES[chip] if self.library(name) is None]

    def require_libraries(self, chip: str) -> dict[str, Path]:
        """Paths of ``chip``'s runtime libraries; raises naming the missing ones and the fix."""
        missing = self.missing_libraries(chip)
        if missing:
            dirs = ", ".join(map(str, self.library_dirs)) or "<none>"
            raise ToolchainError(
                f"the PPL toolchain found by {self.found_by} ({self.ppl_root}) "
                f"lacks the {chip} emulator libraries {', '.join(missing)} (searched: {dirs}). "
                f"Run `{INSTALL_COMMAND}`, or point PPL_PROJECT_ROOT at an SDK whose envsetup.sh puts them on LD_LIBRARY_PATH.",
                owner=error_owner(f"{TARGET_NAME}:{chip}"),
            )
        return {name: path for name in RUNTIME_LIBRARIES[chip] if (path := self.library(name)) is not None}

    def process_env(self) -> dict[str, str]:
        """Environment for subprocesses the backend starts: ours plus what the toolchain exports."""
        return {**os.environ, **self.env}

    def as_toolchain(self) -> Toolchain:
        chips = [c for c in CHIPS if not self.missing_libraries(c)]
        try:
            headers = f"C++ headers for ppl-compile: {', '.join(map(str, cxx_include_dirs()))}"
        except ToolchainError as err:  # every compile raises it too; doctor shows it beforehand
            headers = f"WARNING: {err}"
        notes = (
            f"ppl-compile: {self.ppl_compile}",
            headers,
            f"runtime libraries: {', '.join(map(str, self.library_dirs)) or '<none>'}",
            f"emulator chips: {', '.join(chips) or '<none>'}",
            *(f"WARNING: {warning}" for warning in self.warnings),
        )
        return Toolchain(
            name="ppl-compile",
            version=self.version,
            location=str(self.ppl_root),
            found_by=self.found_by,
            env=dict(self.env),
            fingerprint=self.version,
            notes=notes,
        )


# ----------------------------------------------------------------------------------------
# envsetup.sh
# ----------------------------------------------------------------------------------------


def envsetup_timeout() -> float:
    text = os.environ.get(ENVSETUP_TIMEOUT_ENV, "")
    try:
        return float(text) if text else DEFAULT_ENVSETUP_TIMEOUT_S
    except ValueError:
        raise ToolchainError(f"{ENVSETUP_TIMEOUT_ENV}={text!r} is not a number of seconds.", owner=error_owner()) from None


def world_writable(script: Path) -> list[str]:
    """The script and the folders above it (up to the SDK root's parent) that anyone may modify.

    A folder with the sticky bit (like /tmp) only lets owners replace their own
    files, so it does not count.
    """
    found = []
    for path in (script, script.parent, script.parent.parent):
        with contextlib.suppress(OSError):
            mode = path.stat().st_mode
            if mode & stat.S_IWOTH and not (path.is_dir() and mode & stat.S_ISVTX):
                found.append(str(path))
    return found


def source_envsetup(script: Path, base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables ``script`` exports (new or changed), found by sourcing it in a ``bash`` subprocess.

    The script runs with ``base_env`` (default: this process's environment)
    and its own directory as working directory, in its own process group: if
    it does not finish within :func:`envsetup_timeout` seconds the whole group
    (the script and anything it started) is killed, so nothing is left running.
    Its output goes to stderr, which is quoted in the error if it fails.
    """
    where = error_owner()
    bash = shutil.which("bash")
    if bash is None:
        raise ToolchainError(f"sourcing {script} needs bash, which is not on PATH. Install bash or unset PPL_PROJECT_ROOT.", owner=where)
    base = dict(os.environ if base_env is None else base_env)
    timeout = envsetup_timeout()
    # `source` runs in this shell so its exports reach `env -0`; the script's own output goes to
    # stderr so that stdout carries only the NUL-separated environment.
    command = 'source "$1" >&2 || exit $?; env -0'
    result = run_tool(
        [bash, "--noprofile", "--norc", "-c", command, "tilelang-tpu-envsetup", script], cwd=script.parent, env=base, timeout=timeout
    )
    if result.returncode is None:
        raise ToolchainError(
            f"sourcing {script} (from PPL_PROJECT_ROOT) {result.failure}. "
            f"Fix the script, raise {ENVSETUP_TIMEOUT_ENV}, or unset PPL_PROJECT_ROOT.",
            owner=where,
        )
    if not result.ok:
        stderr = result.excerpt(2000)
        raise ToolchainError(
            f"sourcing {script} (from PPL_PROJECT_ROOT) {result.ended}"
            + (f":\n{stderr}\n" if stderr else ". ")
            + "Fix the script, point PPL_PROJECT_ROOT at a working PPL SDK, or unset it to use an installed "
            f"tpu_mlir or `{INSTALL_COMMAND}`.",
            owner=where,
        )
    exported: dict[str, str] = {}
    for item in result.stdout.split("\0"):
        name, eq, value = item.partition("=")
        if not eq or not name or name in _SHELL_NOISE or name.startswith("BASH_FUNC_"):
            continue
        if base.get(name) != value:
            exported[name] = value
    return exported


# ----------------------------------------------------------------------------------------
# Sources
# ----------------------------------------------------------------------------------------


def install_root() -> Path:
    """Where ``tilelang-tpu toolchain install`` unpacks toolchains (one folder per tpu_mlir version)."""
    explicit = os.environ.get(TOOLCHAIN_DIR_ENV)
    return Path(explicit).expanduser() if explicit else cache_root() / "tpu" / "toolchain"


def _read_version(ppl_root: Path, ppl_compile: Path) -> str:
    version_file = ppl_root / "version"
    if version_file.is_file():
        text = version_file.read_text().strip()
        if text:
            return text
    # No version file (some SDK layouts): identify the compiler binary instead, so that a
    # different compiler never serves kernels cached by another one.
    stat = ppl_compile.stat()
    return f"unknown(size={stat.st_size},mtime={int(stat.st_mtime)})"


def _layout(ppl_root: Path, found_by: str, env: Mapping[str, str], extra_library_dirs: list[Path]) -> TpuToolchain:
    where = error_owner()
    ppl_compile = ppl_root / "bin" / "ppl-compile"
    if not ppl_compile.is_file() and "PATH" in env:
        found = shutil.which("ppl-compile", path=env["PATH"])
        ppl_compile = Path(found) if found else ppl_compile
    problems = []
    if not ppl_compile.is_file():
        problems.append(f"no ppl-compile in {ppl_root / 'bin'}" + (" or on the PATH it exports" if "PATH" in env else ""))
    elif not os.access(ppl_compile, os.X_OK):
        problems.append(f"{ppl_compile} is not executable")
    if not (ppl_root / "inc" / "ppl.h").is_file():
        problems.append(f"no PPL headers ({ppl_root / 'inc' / 'ppl.h'})")
    if problems:
        raise ToolchainError(
            f"the PPL toolchain found by {found_by} at {ppl_root} is incomplete: {'; '.join(problems)}. "
            f"Reinstall it (`{INSTALL_COMMAND}` for the default one) or point PPL_PROJECT_ROOT at a complete PPL SDK.",
            owner=where,
        )
    library_dirs: list[Path] = []
    for entry in env.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if entry and Path(entry).is_absolute():
            library_dirs.append(Path(entry))
    library_dirs.extend(extra_library_dirs)
    unique = tuple(dict.fromkeys(d for d in library_dirs if d.is_dir()))
    return TpuToolchain(
        ppl_root=ppl_root,
        ppl_compile=ppl_compile,
        version=_read_version(ppl_root, ppl_compile),
        found_by=found_by,
        library_dirs=unique,
        env=dict(env),
    )


def _tpu_mlir_env(package: Path) -> dict[str, str]:
    ppl_root = package / "cross_toolchains" / "ppl_compile"
    return {"PPL_PROJECT_ROOT": str(ppl_root), "PPL_RUNTIME_PATH": str(ppl_root / "deps")}


def from_ppl_project_root(value: str, source_scripts: bool = True) -> TpuToolchain:
    """The SDK at ``$PPL_PROJECT_ROOT``; with ``source_scripts=False`` (listing) its
    ``envsetup.sh`` is not run and the directory is used as it is."""
    where = error_owner()
    root = Path(value).expanduser()
    if not root.is_absolute():
        raise ToolchainError(
            f"PPL_PROJECT_ROOT={value!r} is a relative path; it must be absolute (tilelang-tpu never sources "
            "scripts relative to the current directory). Set it to the SDK's absolute path, or unset it.",
            owner=where,
        )
    if not root.is_dir():
        raise ToolchainError(
            f"PPL_PROJECT_ROOT={value!r} is not a directory. Point it at a PPL SDK, or unset it to use `{INSTALL_COMMAND}`.", owner=where
        )
    script = root / "envsetup.sh"
    warnings: list[str] = []
    if script.is_file() and source_scripts:
        writable = world_writable(script)
        if writable:
            warnings.append(
                f"{', '.join(writable)} {'is' if len(writable) == 1 else 'are'} world-writable: anyone on this machine can change "
                f"what tilelang-tpu executes when it sources {script}. Run `chmod o-w` on {'it' if len(writable) == 1 else 'them'}."
            )
            logger.warning("%s: %s", where, warnings[-1])
        env = source_envsetup(script)
        found_by = f"$PPL_PROJECT_ROOT ({script} sourced in a subprocess)"
    elif script.is_file():
        env = {}
        found_by = f"$PPL_PROJECT_ROOT ({script} not run for this listing; it runs on the first compile and in `tilecore doctor`)"
    else:
        env = {}
        found_by = "$PPL_PROJECT_ROOT (no envsetup.sh; used as is)"
    ppl_root = Path(env.get("PPL_PROJECT_ROOT", str(root)))
    env.setdefault("PPL_PROJECT_ROOT", str(ppl_root))
    # The tpu_mlir layout keeps the runtimes two levels up, in tpu_mlir/lib.
    wheel_lib = ppl_root.parent.parent / "lib"
    found = _layout(ppl_root, found_by, env, [wheel_lib, wheel_lib / "third_party"])
    return dataclasses.replace(found, warnings=tuple(warnings)) if warnings else found


def search_path() -> list[str]:
    """``sys.path`` without the entries that mean the current directory (``''``, ``.``,
    relative paths, or the current directory spelled absolutely): a ``tpu_mlir/``
    folder where the user happens to stand must never become the toolchain, whose
    ``ppl-compile`` would then be executed."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        cwd = None
    safe = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry):
            continue
        if cwd is not None and os.path.realpath(entry) == cwd:
            continue
        safe.append(entry)
    return safe


def tpu_mlir_package() -> tuple[Path, str] | None:
    """(package directory, version) of an installed ``tpu_mlir``, found without importing it
    and never in the current directory (see :func:`search_path`)."""
    path = search_path()
    dist = next(iter(importlib.metadata.distributions(name="tpu_mlir", path=path)), None)
    if dist is not None:
        package = Path(str(dist.locate_file("tpu_mlir")))
        if package.is_dir():
            return package, dist.version
    spec = importlib.machinery.PathFinder.find_spec("tpu_mlir", path)  # locates, does not execute the package
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))), "unknown"
    return None


def from_tpu_mlir(package: Path, version: str) -> TpuToolchain:
    env = _tpu_mlir_env(package)
    return _layout(Path(env["PPL_PROJECT_ROOT"]), f"installed tpu_mlir {version} package ({package})", env, [package / "lib"])


def installed_toolchains() -> list[Path]:
    """``tpu_mlir`` folders installed by our command, the default version first, then newest first."""
    root = install_root()
    if not root.is_dir():
        return []
    found = [p / "tpu_mlir" for p in root.iterdir() if not p.name.startswith(".") and (p / "tpu_mlir").is_dir()]

    def order(path: Path) -> tuple[bool, tuple[int, ...]]:
        version = path.parent.name
        numbers = tuple(int(x) for x in version.split(".") if x.isdigit())
        return (version != TOOLCHAIN_WHEEL_VERSION, tuple(-n for n in numbers))

    return sorted(found, key=order)


def from_install(package: Path) -> TpuToolchain:
    env = _tpu_mlir_env(package)
    found_by = f"`{INSTALL_COMMAND}` (tpu_mlir {package.parent.name} in {package.parent})"
    return _layout(Path(env["PPL_PROJECT_ROOT"]), found_by, env, [package / "lib"])


def discover(source_scripts: bool = True) -> TpuToolchain:
    """Find the toolchain (uncached).  Raises :class:`ToolchainError` with the fix."""
    explicit = os.environ.get("PPL_PROJECT_ROOT")
    if explicit:
        return from_ppl_project_root(explicit, source_scripts)
    package = tpu_mlir_package()
    if package is not None:
        return from_tpu_mlir(*package)
    installed = installed_toolchains()
    if installed:
        return from_install(installed[0])
    raise ToolchainError(
        f"no SophGo PPL toolchain found. Looked for, in order: "
        f"(1) $PPL_PROJECT_ROOT: not set; (2) an installed tpu_mlir package: none; "
        f"(3) a toolchain installed by `{INSTALL_COMMAND}` under {install_root()}: none.",
        # Separate, so `tilecore doctor` shows it as the fix; the message ends with " Fix: ..." as before.
        fix=f"run `{INSTALL_COMMAND}` (fetches tpu_mlir=={TOOLCHAIN_WHEEL_VERSION} from PyPI and keeps the ~183 MiB that "
        "compiling and emulation need), or set PPL_PROJECT_ROOT to a PPL SDK.",
        owner=error_owner(),
    )


_Key = tuple[str | None, str, str, int]
_cache: dict[_Key, TpuToolchain] = {}
_failures: dict[_Key, ToolchainError] = {}


def _key() -> _Key:
    root = os.environ.get("PPL_PROJECT_ROOT")
    script_mtime = 0
    if root:
        with contextlib.suppress(OSError):
            script_mtime = (Path(root) / "envsetup.sh").stat().st_mtime_ns
    return (root, str(install_root()), os.environ.get("PATH", ""), script_mtime)


def find_toolchain(source_scripts: bool = True) -> TpuToolchain:
    """:func:`discover`, memoised per process for the environment that decides it.

    Failures are memoised too (a hanging or failing ``envsetup.sh`` is paid for
    once per process, not by every caller); editing the script or changing the
    environment retries.  ``source_scripts=False`` is for listings (``tilecore
    list``): it never runs ``envsetup.sh`` but reuses what an earlier call found.
    """
    key = _key()
    if key in _cache:
        return _cache[key]
    if key in _failures:
        failure = _failures[key]
        raise type(failure)(*failure.args)
    if not source_scripts:
        return discover(source_scripts=False)
    try:
        toolchain = _cache[key] = discover()
    except ToolchainError as err:
        _failures[key] = err
        raise
    return toolchain
