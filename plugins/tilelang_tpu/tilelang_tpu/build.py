"""Build PPL source into an emulator kernel library, cached per user and verified at each reuse.

``ppl-compile`` turns the PPL source into device C (local-memory addresses
assigned), then the host C compiler links that C with PPL's helper against the
chip's emulator library (``libtpuv7_emulator`` for BM1690,
``libcmodel_bm1684x`` for BM1684X).  Results are cached under
``<tilecore cache>/tpu/kernels/<key>/`` where the key is the SHA-256 of the
source, chip, mode, toolchain version and plugin version, and published with one
rename so concurrent processes never see half a build.  A library is verified
against the SHA-256 recorded when it was built (:mod:`tilecore.kit.artifacts`) and
rebuilt if it does not match; :func:`still_intact` is that check for a library
already in use (a worker died running it: is the file to blame?).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from tilecore import Owner, TilecoreError, ToolchainError
from tilecore.kit.artifacts import Artifact, ArtifactStore, adopt
from tilecore.kit.host_compiler import find_host_compiler
from tilecore.kit.paths import cache_dir
from tilecore.kit.tools import run_tool
from tilelang_tpu import __version__, abi
from tilelang_tpu.chips import error_owner
from tilelang_tpu.cxx_headers import cxx_include_dirs
from tilelang_tpu.setup import TpuToolchain
from tilelang_tpu.target import pcie_unsupported

logger = logging.getLogger("tilelang_tpu")

SOURCE = "kernel.pl"
#: ppl-compile's exit status when the tiles do not fit in local memory (host_def.h).
EXIT_LOCAL_MEMORY = 17
#: Per-chip preprocessor defines of the device C (from each chip's config_common.cmake).
CHIP_DEFINES = {"bm1690": ("-D__sg2260__",), "bm1684x": ("-D__bm1684x__",)}
#: The emulator library each chip's device C links against.
EMULATOR_LIBRARY = {"bm1690": "libtpuv7_emulator.so", "bm1684x": "libcmodel_bm1684x.so"}
_KERNEL_DECL = re.compile(r"__KERNEL__\s+void\s+(\w+)\s*\(")

#: ppl-compile runs in this process (for tests and diagnostics: a cache hit leaves it unchanged).
ppl_compile_runs = 0


class PplCompileError(TilecoreError):
    """ppl-compile rejected the generated PPL source."""


class LocalMemoryError(PplCompileError):
    """The kernel's tiles do not fit in the chip's local memory."""


@dataclass(frozen=True)
class Build:
    """A verified kernel library and how it was obtained (seconds are 0 for a cache hit)."""

    library: Path
    cached: bool
    seconds: float
    ppl_compile_seconds: float = 0.0
    link_seconds: float = 0.0
    key: str = ""
    artifact: Artifact | None = None


#: Kernel libraries: ``<tilecore cache>/tpu/kernels/<key>/`` (built once, verified at each reuse).
STORE = ArtifactStore("tpu", "kernels")


def kernel_where(chip: str, mode: str, name: str) -> Owner:
    return error_owner(f"tpu:chip={chip},mode={mode}", kernel=name)


def library_name(key: str) -> str:
    """File name of a kernel library: unique per build key, because SophGo's runtimes
    confuse two kernel libraries that share a file name within one process (the second
    one launched runs with the first one's code)."""
    return f"libtpukernel-{key[:24]}.so"


def cache_key(source: str, chip: str, mode: str, toolchain: TpuToolchain) -> str:
    parts = ("tilelang-tpu-kernel/1", source, chip, mode, toolchain.version, __version__)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def check_entry(source: str, name: str, where: Owner) -> str:
    """The entry the ABI requires, after checking the source defines exactly that kernel."""
    wanted = abi.entry_name(name)
    found = _KERNEL_DECL.findall(source)
    if found != [wanted]:
        raise TilecoreError(
            f"the PPL source must define exactly one __KERNEL__ function named {wanted!r} "
            f"(tilelang_tpu.abi.entry_name({name!r})), but defines {found or 'none'}.",
            owner=where,
        )
    return wanted


def _compiler() -> str:
    return find_host_compiler("c", error_owner()).path


def _keep_failure(key: str, source: str, log: str) -> Path:
    """Keep a failing source and the tool's output in the user cache for inspection."""
    folder = cache_dir("tpu", "failed", key)
    (folder / SOURCE).write_text(source)
    (folder / "build.log").write_text(log)
    return folder / SOURCE


def _ppl_compile(source_path: Path, out: Path, chip: str, toolchain: TpuToolchain, key: str, source: str, where: Owner) -> Path:
    global ppl_compile_runs
    command = [
        str(toolchain.ppl_compile),
        str(source_path),
        "--I",
        str(toolchain.include_dir),
        # One consistent libstdc++ header set, searched before the folders ppl-compile adds by itself
        # (it hard-codes GCC 11/12 ones, which mixed with GCC 13's on Ubuntu 24.04: tilelang_tpu.cxx_headers).
        *(arg for folder in cxx_include_dirs() for arg in ("-I", str(folder))),
        "--chip",
        toolchain.chip_code(chip),
        "--O2",
        "-o",
        str(out),
    ]
    ppl_compile_runs += 1
    result = run_tool(command, cwd=out.parent, env=toolchain.process_env())
    if result.ok:
        device_c = out / "device" / f"{source_path.stem}.c"
        if device_c.is_file():
            return device_c
    kept = _keep_failure(key, source, result.log())
    if result.returncode == EXIT_LOCAL_MEMORY:
        raise LocalMemoryError(
            f"the kernel's tiles do not fit in {chip}'s local memory (ppl-compile exit status 17, local-memory "
            f"address assignment failed). Use smaller tiles (block sizes) or fewer live local buffers. Source kept at {kept}.",
            owner=where,
        )
    raise PplCompileError(
        f"ppl-compile {result.ended}:\n{result.excerpt()}\n"
        f"The generated PPL source is kept at {kept} (full log next to it). This is a bug in the tpu codegen or an "
        "unsupported construct; please report it with that file.",
        owner=where,
    )


def _link(device_c: Path, output: Path, chip: str, toolchain: TpuToolchain, key: str, source: str, where: Owner) -> None:
    libraries = toolchain.require_libraries(chip)
    emulator_lib = libraries[EMULATOR_LIBRARY[chip]]
    code = toolchain.chip_code(chip)
    deps = toolchain.deps_dir
    chip_dir = deps / "chip" / code
    includes = [chip_dir, chip_dir / "TPU1686" / "kernel" / "include", deps / "common" / "dev" / "kernel",
                deps / "common" / "dev" / "utils" / "include", deps / "common" / "dev" / "checker" / "include"]  # fmt: skip
    command = [
        # -fexcess-precision=standard: GCC 13's default for GNU C ("fast") lets casts to _Float16/__bf16 skip their
        # rounding, so the emulated kernel returned int32 -> fp16 -> bf16 -> fp32 as -437 where torch gives -436
        # (differential run on a gcc 13 host, docs/benchmarks/tpu-differential.md).  Accepted by GCC since 4.5.
        _compiler(), "-O2", "-fexcess-precision=standard", "-fPIC", "-shared", f"-D__{code}__", *CHIP_DEFINES[chip],
        "-DUSING_CMODEL", *(f"-I{d}" for d in includes), str(device_c), str(deps / "common" / "dev" / "utils" / "src" / "ppl_helper.c"),
        f"-L{emulator_lib.parent}", f"-Wl,-rpath,{emulator_lib.parent}", f"-l{emulator_lib.stem.removeprefix('lib')}",
        "-lm", "-Wl,--no-undefined", "-o", str(output),
    ]  # fmt: skip
    result = run_tool(command, env=toolchain.process_env())
    if not result.ok:
        kept = _keep_failure(key, source, result.log())
        raise ToolchainError(f"linking the device library {result.ended}:\n{result.excerpt()}\nSource kept at {kept}.", owner=where)


def build(source: str, name: str, chip: str, mode: str, toolchain: TpuToolchain, verified_copy: Path | None = None) -> Build:
    """The kernel library for ``source``: reused from the disk cache when its recorded
    SHA-256 matches, else built (once, under a lock shared by concurrent processes).

    ``verified_copy``: tilelang's copy of this very library (a disk-cache hit), adopted
    instead of re-running ppl-compile and the link when the store has no intact entry
    (:func:`tilecore.kit.artifacts.adopt`), and repaired if it differs.
    """
    where = kernel_where(chip, mode, name)
    if mode != "cmodel":
        raise pcie_unsupported()
    check_entry(source, name, where)
    key = cache_key(source, chip, mode, toolchain)
    filename = library_name(key)

    def make(staging: Path) -> dict[str, object]:
        started = time.perf_counter()
        manifest = {
            "name": name,
            "entry": abi.launch_symbol(name),
            "chip": chip,
            "mode": mode,
            "toolchain": toolchain.version,
            "plugin": __version__,
        }
        if adopt(verified_copy, staging / filename):
            (staging / "build.json").write_text(json.dumps({**manifest, "adopted_from": str(verified_copy)}, indent=2) + "\n")
            return {"ppl_compile_seconds": 0.0, "link_seconds": 0.0, "adopted": True}
        source_path = staging / SOURCE
        source_path.write_text(source)
        device_c = _ppl_compile(source_path, staging / "gen", chip, toolchain, key, source, where)
        compiled = time.perf_counter()
        _link(device_c, staging / filename, chip, toolchain, key, source, where)
        linked = time.perf_counter()
        (staging / "build.json").write_text(json.dumps(manifest, indent=2) + "\n")
        return {"ppl_compile_seconds": compiled - started, "link_seconds": linked - compiled}

    artifact = STORE.obtain(key, filename, make, what=where, copy=verified_copy)
    if not artifact.built:
        logger.debug("%s: verified disk cache hit %s", where, artifact.path)
        return Build(artifact.path, True, 0.0, key=key, artifact=artifact)
    details = artifact.details
    return Build(
        artifact.path, False, artifact.seconds, float(details["ppl_compile_seconds"]), float(details["link_seconds"]), key, artifact
    )


def forget(build: Build) -> None:
    """Drop ``build``'s library from the disk cache (its kernel faulted): never reused again."""
    if build.key:
        STORE.discard(build.key)


def still_intact(build: Build) -> bool:
    """Whether ``build``'s library still matches the size and SHA-256 recorded when it was built."""
    return not build.key or STORE.lookup(build.key, library_name(build.key), quiet=True) is not None
