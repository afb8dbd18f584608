"""Build PPL source into an emulator kernel library (cached per user) and launch it.

Build: ``ppl-compile`` turns the PPL source into device C (local-memory
addresses assigned), then the host C compiler links that C with PPL's helper
against the chip's emulator library (``libtpuv7_emulator`` for BM1690,
``libcmodel_bm1684x`` for BM1684X).  Results are cached under
``<tilecore cache>/tpu/kernels/<key>/`` where the key is the SHA-256 of the
source, chip, mode, toolchain version and plugin version, and published with one
rename so concurrent processes never see half a build.

Launch: :class:`Bm1690Adapter` (in-process, :mod:`tilelang_tpu.tpuv7`) and
:class:`Bm1684xAdapter` (a worker process per library,
:mod:`tilelang_tpu.bmlib_worker`; see there for why).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import torch

from tilecore import CompiledKernel, TilecoreError, ToolchainError
from tilecore.paths import atomic_write, cache_dir, publish_dir
from tilelang_tpu import __version__, abi, emulator
from tilelang_tpu.setup import TpuToolchain
from tilelang_tpu.target import PCIE_UNSUPPORTED

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
    """A kernel library and how it was obtained (seconds are 0 for a cache hit)."""

    library: Path
    cached: bool
    seconds: float
    ppl_compile_seconds: float = 0.0
    link_seconds: float = 0.0


def _where(chip: str, mode: str, name: str) -> str:
    from tilelang_tpu.target import owner

    return f"kernel {name!r} for target tpu:chip={chip},mode={mode} ({owner()})"


def library_name(key: str) -> str:
    """File name of a kernel library: unique per build key, because SophGo's runtimes
    confuse two kernel libraries that share a file name within one process (the second
    one launched runs with the first one's code)."""
    return f"libtpukernel-{key[:24]}.so"


def unique_library(path: Path) -> Path:
    """``path`` itself if its name came from :func:`library_name`, else a content-addressed
    copy of it in the user cache (tilelang's disk cache stores every library as
    ``kernel_lib.bin``, which would collide, see :func:`library_name`)."""
    if path.name.startswith("libtpukernel-") and path.suffix == ".so":
        return path
    data = path.read_bytes()
    copy = cache_dir("tpu", "libraries") / library_name(hashlib.sha256(data).hexdigest())
    if not copy.is_file():
        atomic_write(copy, data)
    return copy


def cache_key(source: str, chip: str, mode: str, toolchain: TpuToolchain) -> str:
    parts = ("tilelang-tpu-kernel/1", source, chip, mode, toolchain.version, __version__)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def check_entry(source: str, name: str, where: str) -> str:
    """The entry the ABI requires, after checking the source defines exactly that kernel."""
    wanted = abi.entry_name(name)
    found = _KERNEL_DECL.findall(source)
    if found != [wanted]:
        raise TilecoreError(
            f"{where}: the PPL source must define exactly one __KERNEL__ function named {wanted!r} "
            f"(tilelang_tpu.abi.entry_name({name!r})), but defines {found or 'none'}."
        )
    return wanted


def _compiler() -> str:
    explicit = os.environ.get("CC")
    found = shutil.which(explicit) if explicit else (shutil.which("gcc") or shutil.which("cc"))
    if found is None:
        raise ToolchainError(
            f"target 'tpu' (tilelang-tpu {__version__}) links kernel libraries with a host C compiler and found none "
            f"({'CC=' + explicit if explicit else 'gcc or cc on PATH'}). Install one (apt-get install gcc) or set CC."
        )
    return found


def _keep_failure(key: str, source: str, log: str) -> Path:
    """Keep a failing source and the tool's output in the user cache for inspection."""
    folder = cache_dir("tpu", "failed", key)
    (folder / SOURCE).write_text(source)
    (folder / "build.log").write_text(log)
    return folder / SOURCE


def _ppl_compile(source_path: Path, out: Path, chip: str, toolchain: TpuToolchain, key: str, source: str, where: str) -> Path:
    global ppl_compile_runs
    command = [str(toolchain.ppl_compile), str(source_path), "--I", str(toolchain.include_dir), "--chip", toolchain.chip_code(chip), "--O2", "-o", str(out)]
    ppl_compile_runs += 1
    result = subprocess.run(command, cwd=out.parent, env=toolchain.process_env(), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if result.returncode == 0:
        device_c = out / "device" / f"{source_path.stem}.c"
        if device_c.is_file():
            return device_c
    log = f"$ {' '.join(command)}\nexit status {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    kept = _keep_failure(key, source, log)
    if result.returncode == EXIT_LOCAL_MEMORY:
        raise LocalMemoryError(
            f"{where}: the kernel's tiles do not fit in {chip}'s local memory (ppl-compile exit status 17, local-memory "
            f"address assignment failed). Use smaller tiles (block sizes) or fewer live local buffers. Source kept at {kept}."
        )
    output = (result.stderr or result.stdout).strip()
    excerpt = output if len(output) <= 3000 else f"{output[:2000]}\n[...]\n{output[-1000:]}"
    status = f"crashed with signal {signal.Signals(-result.returncode).name}" if result.returncode < 0 else f"failed with exit status {result.returncode}"
    raise PplCompileError(
        f"{where}: ppl-compile {status}:\n{excerpt}\n"
        f"The generated PPL source is kept at {kept} (full log next to it). This is a bug in the tpu codegen or an "
        "unsupported construct; please report it with that file."
    )


def _link(device_c: Path, output: Path, chip: str, toolchain: TpuToolchain, key: str, source: str, where: str) -> None:
    libraries = toolchain.require_libraries(chip)
    emulator_lib = libraries[EMULATOR_LIBRARY[chip]]
    code = toolchain.chip_code(chip)
    deps = toolchain.deps_dir
    chip_dir = deps / "chip" / code
    includes = [chip_dir, chip_dir / "TPU1686" / "kernel" / "include", deps / "common" / "dev" / "kernel",
                deps / "common" / "dev" / "utils" / "include", deps / "common" / "dev" / "checker" / "include"]  # fmt: skip
    command = [
        _compiler(), "-O2", "-fPIC", "-shared", f"-D__{code}__", *CHIP_DEFINES[chip], "-DUSING_CMODEL",
        *(f"-I{d}" for d in includes), str(device_c), str(deps / "common" / "dev" / "utils" / "src" / "ppl_helper.c"),
        f"-L{emulator_lib.parent}", f"-Wl,-rpath,{emulator_lib.parent}", f"-l{emulator_lib.stem.removeprefix('lib')}",
        "-lm", "-Wl,--no-undefined", "-o", str(output),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, env=toolchain.process_env())
    if result.returncode != 0:
        kept = _keep_failure(key, source, f"$ {' '.join(command)}\n{result.stdout}\n{result.stderr}")
        raise ToolchainError(f"{where}: linking the device library failed:\n{result.stderr.strip()[-3000:]}\nSource kept at {kept}.")


def build(source: str, name: str, chip: str, mode: str, toolchain: TpuToolchain) -> Build:
    """The kernel library for ``source`` (from the disk cache when present)."""
    where = _where(chip, mode, name)
    if mode != "cmodel":
        raise ToolchainError(PCIE_UNSUPPORTED)
    check_entry(source, name, where)
    key = cache_key(source, chip, mode, toolchain)
    final = cache_dir("tpu", "kernels") / key
    library = final / library_name(key)
    if library.is_file():
        logger.debug("%s: disk cache hit %s", where, library)
        return Build(library, True, 0.0)
    started = time.perf_counter()
    staging = cache_dir("tpu", "kernels") / f".staging-{key}-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        source_path = staging / SOURCE
        source_path.write_text(source)
        device_c = _ppl_compile(source_path, staging / "gen", chip, toolchain, key, source, where)
        compiled = time.perf_counter()
        _link(device_c, staging / library.name, chip, toolchain, key, source, where)
        linked = time.perf_counter()
        manifest = {"name": name, "entry": abi.launch_symbol(name), "chip": chip, "mode": mode, "toolchain": toolchain.version, "plugin": __version__}
        (staging / "build.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if final.exists() and not library.is_file():
            shutil.rmtree(final, ignore_errors=True)  # an incomplete entry (e.g. an older layout)
        publish_dir(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    seconds = time.perf_counter() - started
    logger.debug("%s: built %s in %.3f s", where, library, seconds)
    return Build(library, False, seconds, compiled - started, linked - compiled)


# ----------------------------------------------------------------------------------------
# Adapters
# ----------------------------------------------------------------------------------------


class Bm1690Adapter:
    """Runs a BM1690 kernel library in this process through ``libtpuv7_rt`` (emulator)."""

    chip = "bm1690"
    mode = "cmodel"

    def __init__(self, kernel: CompiledKernel, library: Path, toolchain: TpuToolchain) -> None:
        from tilelang_tpu.tpuv7 import Tpuv7Runtime

        self.library_path = str(library)
        self._where = _where(self.chip, self.mode, kernel.name)
        self._runtime = Tpuv7Runtime.get(toolchain, self._where)
        self._module = self._runtime.load(library, self._where)
        self._symbol = abi.launch_symbol(kernel.name)
        self._types = abi.slot_ctypes([(p.dtype, not p.shape) for p in kernel.params])

    def __call__(self, *tensors: torch.Tensor | int | float) -> None:
        self._runtime.run(self._module, self._symbol, tensors, self._where, self._types)


class _Worker:
    """Parent side of one :mod:`tilelang_tpu.bmlib_worker` process."""

    def __init__(self, library: Path, symbol: str, toolchain: TpuToolchain, where: str) -> None:
        libraries = toolchain.require_libraries("bm1684x")
        self._where = where
        self._lock = threading.Lock()
        workdir = emulator.ensure_workdir()
        self._log_path = Path(workdir) / f"bm1684x-worker-{os.getpid()}-{id(self):x}.log"
        env = toolchain.process_env()
        env["TPUKERNEL_FIRMWARE_PATH"] = str(library)  # read by bm_dev_request: this worker's one library
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]))
        self._log: IO[bytes] = open(self._log_path, "wb")  # noqa: SIM115 - lives as long as the worker
        command = [sys.executable, "-m", "tilelang_tpu.bmlib_worker", str(libraries["libbmlib.so"].parent), str(library), symbol]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=workdir)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests, self._replies = self._process.stdin, self._process.stdout
        self._expect_ok("start-up")

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self._log_path.read_text(errors="replace")[-2000:]
        return ""

    def _expect_ok(self, stage: str) -> None:
        line = self._replies.readline()
        if not line:
            code = self._process.wait(timeout=30)
            raise TilecoreError(f"{self._where}: the BM1684X worker process exited (status {code}) during {stage}. Its output:\n{self._log_tail()}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise TilecoreError(f"{self._where}: the BM1684X worker failed during {stage}: {reply.get('error')}. Its output:\n{self._log_tail()}")

    def run(self, tensors: tuple[torch.Tensor, ...]) -> None:
        sizes = [t.numel() * t.element_size() for t in tensors]
        with self._lock:
            try:
                self._requests.write(json.dumps({"sizes": sizes}).encode() + b"\n")
                for tensor, size in zip(tensors, sizes, strict=True):
                    if size:
                        self._requests.write(_bytes_of(tensor))
                self._requests.flush()
            except BrokenPipeError:
                raise TilecoreError(f"{self._where}: the BM1684X worker process is gone. Its output:\n{self._log_tail()}") from None
            self._expect_ok("launch")
            for tensor, size in zip(tensors, sizes, strict=True):
                if size:
                    data = self._replies.read(size)
                    if len(data) != size:
                        raise TilecoreError(f"{self._where}: the BM1684X worker sent a short reply. Its output:\n{self._log_tail()}")
                    _bytes_of(tensor)[:] = data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """A writable byte view of a contiguous host tensor's storage (no copy)."""
    return memoryview(tensor.reshape(-1).view(torch.uint8).numpy())


_workers: dict[str, _Worker] = {}
_workers_lock = threading.Lock()


def _worker(library: Path, symbol: str, toolchain: TpuToolchain, where: str) -> _Worker:
    with _workers_lock:
        worker = _workers.get(str(library))
        if worker is None:
            if not _workers:
                # Registered after the scratch directory's removal, so it runs before it (atexit is LIFO).
                emulator.ensure_workdir()
                atexit.register(close_workers)
            worker = _workers[str(library)] = _Worker(library, symbol, toolchain, where)
        return worker


def close_workers() -> None:
    """Stop every BM1684X worker of this process (also run at exit)."""
    with _workers_lock:
        for worker in _workers.values():
            worker.close()
        _workers.clear()


class Bm1684xAdapter:
    """Runs a BM1684X kernel library in its own worker process through ``libbmlib`` (cmodel)."""

    chip = "bm1684x"
    mode = "cmodel"

    def __init__(self, kernel: CompiledKernel, library: Path, toolchain: TpuToolchain) -> None:
        self.library_path = str(library)
        self._where = _where(self.chip, self.mode, kernel.name)
        self._worker = _worker(library, abi.launch_symbol(kernel.name), toolchain, self._where)

    def __call__(self, *tensors: torch.Tensor) -> None:
        self._worker.run(tensors)


ADAPTERS = {"bm1690": Bm1690Adapter, "bm1684x": Bm1684xAdapter}


def create_adapter(kernel: CompiledKernel, toolchain: TpuToolchain) -> Bm1690Adapter | Bm1684xAdapter:
    """Build (or reuse) ``kernel``'s library and wrap it in the chip's adapter."""
    chip, mode = kernel.target["chip"], kernel.target["mode"]
    if mode != "cmodel":
        raise ToolchainError(PCIE_UNSUPPORTED)
    if kernel.library_path is not None:
        library = unique_library(Path(kernel.library_path))
    else:
        library = build(kernel.source, kernel.name, chip, mode, toolchain).library
    return ADAPTERS[chip](kernel, library, toolchain)


__all__ = ["Bm1684xAdapter", "Bm1690Adapter", "Build", "LocalMemoryError", "PplCompileError", "build", "create_adapter"]
