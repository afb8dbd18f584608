"""Build PPL source into an emulator kernel library (cached per user) and launch it.

Build: ``ppl-compile`` turns the PPL source into device C (local-memory
addresses assigned), then the host C compiler links that C with PPL's helper
against the chip's emulator library (``libtpuv7_emulator`` for BM1690,
``libcmodel_bm1684x`` for BM1684X).  Results are cached under
``<tilecore cache>/tpu/kernels/<key>/`` where the key is the SHA-256 of the
source, chip, mode, toolchain version and plugin version, and published with one
rename so concurrent processes never see half a build.

Reuse: the library is verified against the SHA-256 recorded when it was built
(:mod:`tilecore.kit.artifacts`) and rebuilt if it does not match.

Launch: in emulator worker processes (:mod:`tilelang_tpu.worker`, see there
for why), one for every BM1690 library and one per BM1684X library, stopped
after :func:`idle_timeout` seconds without a launch.  A fault the emulator
reports (on its output, as ``has error``, while every call returns 0) or a
worker that dies becomes :class:`tilecore.errors.KernelFaultError` naming the
target and the kernel; the library is then dropped from the cache.
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch

from tilecore import CompiledKernel, TilecoreError, ToolchainError
from tilecore.errors import KernelFaultError
from tilecore.kit.artifacts import Artifact, ArtifactStore
from tilecore.kit.host_compiler import find_host_compiler
from tilecore.kit.paths import cache_dir
from tilelang_tpu import __version__, abi, emulator
from tilelang_tpu.grid import launch_cores
from tilelang_tpu.setup import TpuToolchain
from tilelang_tpu.target import CHIP_CORES, DIST, PCIE_UNSUPPORTED

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


def _where(chip: str, mode: str, name: str) -> str:
    from tilelang_tpu.target import owner

    return f"kernel {name!r} for target tpu:chip={chip},mode={mode} ({owner()})"


def library_name(key: str) -> str:
    """File name of a kernel library: unique per build key, because SophGo's runtimes
    confuse two kernel libraries that share a file name within one process (the second
    one launched runs with the first one's code)."""
    return f"libtpukernel-{key[:24]}.so"


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
    return find_host_compiler("c", f"target 'tpu' ({DIST} {__version__})").path


def _keep_failure(key: str, source: str, log: str) -> Path:
    """Keep a failing source and the tool's output in the user cache for inspection."""
    folder = cache_dir("tpu", "failed", key)
    (folder / SOURCE).write_text(source)
    (folder / "build.log").write_text(log)
    return folder / SOURCE


def _ppl_compile(source_path: Path, out: Path, chip: str, toolchain: TpuToolchain, key: str, source: str, where: str) -> Path:
    global ppl_compile_runs
    command = [
        str(toolchain.ppl_compile),
        str(source_path),
        "--I",
        str(toolchain.include_dir),
        "--chip",
        toolchain.chip_code(chip),
        "--O2",
        "-o",
        str(out),
    ]
    ppl_compile_runs += 1
    result = subprocess.run(
        command, cwd=out.parent, env=toolchain.process_env(), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
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
    status = (
        f"crashed with signal {signal.Signals(-result.returncode).name}"
        if result.returncode < 0
        else f"failed with exit status {result.returncode}"
    )
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


def build(source: str, name: str, chip: str, mode: str, toolchain: TpuToolchain, verified_copy: Path | None = None) -> Build:
    """The kernel library for ``source``: reused from the disk cache when its recorded
    SHA-256 matches, else built (once, under a lock shared by concurrent processes).

    ``verified_copy`` is a copy of this very library that its holder has already checked
    against a content hash (tilelang's disk-cache entry, checked against its manifest
    before the adapter is created; a remote-cache entry is checked before it is installed
    there).  When the store has no intact entry it is adopted instead of re-running
    ppl-compile and the link: a kernel served by the local or remote tilelang cache never
    pays the device build again.
    """
    where = _where(chip, mode, name)
    if mode != "cmodel":
        raise ToolchainError(PCIE_UNSUPPORTED)
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
        if verified_copy is not None and verified_copy.is_file() and verified_copy.stat().st_size > 0:
            shutil.copyfile(verified_copy, staging / filename)
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

    artifact = STORE.obtain(key, filename, make, what=where)
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


# ----------------------------------------------------------------------------------------
# Adapters
# ----------------------------------------------------------------------------------------


#: A worker idle this long (seconds) is stopped: its emulator threads poll while it lives.
IDLE_TIMEOUT_ENV = "TILELANG_TPU_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT_S = 2.0
#: At most this many workers live at once (BM1684X needs one per kernel library); the least
#: recently used idle one is stopped to make room.
MAX_WORKERS = 4
#: What SophGo's runtimes print when a kernel faults while every runtime call still returns 0.
FAULT_LINE = re.compile(r"^.*(?:has error|ERROR: ASSERT|assert(?:ion)? fail).*$", re.MULTILINE | re.IGNORECASE)


def idle_timeout() -> float:
    text = os.environ.get(IDLE_TIMEOUT_ENV, "")
    try:
        return max(float(text), 0.0) if text else DEFAULT_IDLE_TIMEOUT_S
    except ValueError:
        raise TilecoreError(f"target 'tpu' ({DIST} {__version__}): {IDLE_TIMEOUT_ENV}={text!r} is not a number of seconds.") from None


class _Worker:
    """Parent side of one emulator worker process (:mod:`tilelang_tpu.worker`)."""

    def __init__(self, chip: str, arguments: list[str], toolchain: TpuToolchain, where: str) -> None:
        libraries = toolchain.require_libraries(chip)
        library_dir = next(iter(libraries.values())).parent
        self._lock = threading.Lock()
        self.busy = 0
        self.last_used = time.monotonic()
        workdir = emulator.ensure_workdir()
        self._log_path = Path(workdir) / f"{chip}-worker-{os.getpid()}-{id(self):x}.log"
        env = toolchain.process_env()
        env[emulator.WORKDIR_ENV] = str(workdir)
        if chip == "bm1684x":
            env["TPUKERNEL_FIRMWARE_PATH"] = arguments[0]  # read by bm_dev_request: this worker's one library
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]))
        self._log: IO[bytes] = open(self._log_path, "wb")  # noqa: SIM115 - lives as long as the worker
        command = [sys.executable, "-m", "tilelang_tpu.worker", chip, str(library_dir), *arguments]
        # Own session: a Ctrl-C in the terminal interrupts the user's process, which then stops the worker.
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=workdir, start_new_session=True
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests, self._replies = self._process.stdin, self._process.stdout
        try:
            # A BM1684X worker loads its kernel library at start-up: failing there is that kernel's fault.
            ready = self._expect_ok("start-up", where, fault=chip == "bm1684x")
        except BaseException:
            self.close()
            raise
        _report_startup(ready, where)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def _log_text(self, offset: int = 0) -> str:
        with contextlib.suppress(OSError), open(self._log_path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
        return ""

    def _fail(self, message: str, where: str, fault: bool, offset: int = 0) -> TilecoreError:
        output = self._log_text(offset).strip()[-2000:]
        text = f"{where}: {message}." + (f" The emulator's output:\n{output}" if output else "")
        return KernelFaultError(text) if fault else TilecoreError(text)

    def _expect_ok(self, stage: str, where: str, fault: bool, offset: int = 0) -> dict[str, Any]:
        line = self._replies.readline()
        if not line:
            try:
                code = self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                code = self._process.wait()
            status = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            raise self._fail(f"the emulator worker process died ({status}) during {stage}", where, fault, offset)
        reply = json.loads(line)
        if not reply.get("ok"):
            raise self._fail(f"the emulator reported an error during {stage}: {reply.get('error')}", where, fault, offset)
        return dict(reply)

    def run(
        self, library: Path, symbol: str, tensors: tuple[torch.Tensor, ...], where: str, scalars: Sequence[Any] = (), cores: int = 1
    ) -> None:
        sizes = [t.numel() * t.element_size() for t in tensors]
        with self._lock:
            offset = self._log_path.stat().st_size if self._log_path.exists() else 0
            try:
                header: dict[str, Any] = {"library": str(library), "symbol": symbol, "sizes": sizes}
                if scalars:
                    header["scalars"] = list(scalars)  # [slot, dtype, value] of each scalar parameter (abi.py)
                if cores > 1:
                    header["cores"] = cores  # a multi-core kernel (grid.launch_cores)
                self._requests.write(json.dumps(header).encode() + b"\n")
                for tensor, size in zip(tensors, sizes, strict=True):
                    if size:
                        self._requests.write(_bytes_of(tensor))
                self._requests.flush()
            except BrokenPipeError:
                raise self._fail("the emulator worker process is gone", where, True, offset) from None
            self._expect_ok(f"the launch of {symbol}", where, fault=True, offset=offset)
            outputs = []
            for size in sizes:
                data = self._replies.read(size) if size else b""
                if len(data) != size:
                    raise self._fail("the emulator worker sent a short reply", where, True, offset)
                outputs.append(data)
            faults = FAULT_LINE.findall(self._log_text(offset))
            if faults:
                # The runtime returned success but reported a fault on its error channel: the
                # outputs are garbage, so they are not handed back.
                lines = "\n".join(dict.fromkeys(line.strip() for line in faults))
                raise KernelFaultError(
                    f"{where}: the SophGo emulator reported a fault while running {symbol} although every runtime call "
                    f"returned success:\n{lines}\nThe outputs were discarded and the kernel library is dropped from the "
                    "cache. This is a bug in the tpu codegen or in a hand-written kernel; please report it with the source "
                    "(kernel.get_kernel_source())."
                )
            for tensor, data in zip(tensors, outputs, strict=True):
                if data:
                    _bytes_of(tensor)[:] = data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        with contextlib.suppress(OSError):
            self._replies.close()
        self._log.close()
        with contextlib.suppress(OSError):
            self._log_path.unlink()


#: A worker start slower than this (seconds) is logged with its steps' times.
SLOW_STARTUP_S = 10.0


def _report_startup(ready: dict[str, Any], where: str) -> None:
    """Log what the worker's start-up found: a released dead holder's lock, or a stalled step."""
    steps: dict[str, float] = ready.get("startup") or {}
    if ready.get("stale_lock"):
        logger.info(
            "%s: released the BM1690 runtime's start-up lock left by a process that died holding it (%s); "
            "without this the start would have waited 31 s (tilelang_tpu/device_lock.py)",
            where,
            ready["stale_lock"],
        )
    if sum(steps.values()) > SLOW_STARTUP_S:
        times = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in steps.items())
        logger.warning("%s: the emulator took %.1f s to start (%s)", where, sum(steps.values()), times)


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """A writable byte view of a contiguous host tensor's storage (no copy)."""
    return tensor.reshape(-1).view(torch.uint8).numpy().data


class WorkerPool:
    """The emulator workers of this process: started on first use, stopped when idle.

    A reaper thread, alive only while workers are, stops every worker that has
    not run a kernel for :func:`idle_timeout` seconds, so an idle process costs
    no CPU; the next launch starts a fresh worker (about 0.1-0.3 s).
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._workers: dict[tuple[str, ...], _Worker] = {}
        self._reaper: threading.Thread | None = None
        self._exit_hook = False

    def __len__(self) -> int:
        return len(self._workers)

    def run(self, key: tuple[str, ...], chip: str, arguments: list[str], toolchain: TpuToolchain,
            library: Path, symbol: str, tensors: tuple[torch.Tensor, ...], where: str, scalars: Sequence[Any] = (),
            cores: int = 1) -> None:  # fmt: skip
        with self._lock:
            worker = self._workers.get(key)
            if worker is not None and not worker.alive:
                worker.close()
                del self._workers[key]
                worker = None
            if worker is None:
                self._make_room()
                if not self._exit_hook:
                    # Registered after the scratch directory's removal, so it runs before it (atexit is LIFO).
                    emulator.ensure_workdir()
                    atexit.register(self.close)
                    self._exit_hook = True
                worker = self._workers[key] = _Worker(chip, arguments, toolchain, where)
            worker.busy += 1
            if self._reaper is None and idle_timeout() > 0:
                self._reaper = threading.Thread(target=self._reap, name="tilelang-tpu-worker-reaper", daemon=True)
                self._reaper.start()
        try:
            worker.run(library, symbol, tensors, where, scalars, cores)
        except KernelFaultError:
            with self._lock:
                if self._workers.get(key) is worker:
                    del self._workers[key]  # a worker whose emulator faulted is not reused
            worker.close()
            raise
        finally:
            with self._lock:
                worker.busy -= 1
                worker.last_used = time.monotonic()

    def _make_room(self) -> None:
        idle = sorted((w.last_used, k) for k, w in self._workers.items() if not w.busy)
        while len(self._workers) >= MAX_WORKERS and idle:
            self._workers.pop(idle.pop(0)[1]).close()

    def _reap(self) -> None:
        with self._lock:
            while self._workers:
                timeout = idle_timeout()
                now = time.monotonic()
                for key, worker in list(self._workers.items()):
                    if not worker.busy and now - worker.last_used >= timeout:
                        del self._workers[key]
                        worker.close()
                if self._workers:
                    self._lock.wait(timeout=max(timeout / 2, 0.05))
            self._reaper = None

    def close(self) -> None:
        """Stop every worker of this process (also run at exit)."""
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
            self._lock.notify_all()
        for worker in workers:
            worker.close()


WORKERS = WorkerPool()


def close_workers() -> None:
    """Stop every emulator worker of this process (also run at exit)."""
    WORKERS.close()


class EmulatorAdapter:
    """Runs a kernel library on SophGo's emulator in a worker process (see :mod:`tilelang_tpu.worker`)."""

    chip = ""
    mode = "cmodel"

    def __init__(self, kernel: CompiledKernel, build: Build, toolchain: TpuToolchain) -> None:
        self.library_path: str | None = str(build.library)  # KernelAdapter declares it Optional
        self._build = build
        self._toolchain = toolchain
        self._where = _where(self.chip, self.mode, kernel.name)
        self._symbol = abi.launch_symbol(kernel.name)
        #: slot -> dtype of each scalar parameter (a 0-d param, passed as a Python number)
        self._scalars = {i: str(p.dtype).removeprefix("torch.") for i, p in enumerate(kernel.params) if not p.shape}
        #: (entry slot, parameter index, axis) of each symbolic dimension: its value is that
        #: tensor's size along that axis (abi.shape_symbols; tilecore's Launcher has already
        #: checked that every tensor naming the symbol agrees)
        self._params = kernel.params
        self._shape_sources = [
            (len(kernel.params) + k, *next((i, p.shape.index(name)) for i, p in enumerate(kernel.params) if name in p.shape))
            for k, name in enumerate(abi.shape_symbols([p.shape for p in kernel.params]))
        ]
        try:
            #: cores to launch on: exactly those the library was compiled for (its set_core_num)
            self.cores = launch_cores(kernel.source, CHIP_CORES[self.chip])
        except ValueError as err:
            raise TilecoreError(f"{self._where}: {err}.") from None
        toolchain.require_libraries(self.chip)

    def _key(self) -> tuple[tuple[str, ...], list[str]]:
        raise NotImplementedError

    def __call__(self, *args: torch.Tensor | int | float) -> None:
        key, arguments = self._key()
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        scalars = [[i, self._scalars[i], args[i]] for i in self._scalars]
        for slot, index, axis in self._shape_sources:
            size = args[index].shape[axis]  # type: ignore[union-attr]  # a tensor parameter
            if size > abi.SHAPE_MAX:
                param = self._params[index]
                raise TilecoreError(
                    f"{self._where}: argument {index} ({param.describe()}) has {param.shape[axis]}={size} on axis {axis}, "
                    f"more than the {abi.SHAPE_MAX} an {abi.SHAPE_DTYPE} dimension parameter holds. Split the call."
                )
            scalars.append([slot, abi.SHAPE_DTYPE, int(size)])
        try:
            WORKERS.run(
                key, self.chip, arguments, self._toolchain, self._build.library, self._symbol, tensors, self._where, scalars, self.cores
            )
        except KernelFaultError:
            forget(self._build)
            raise


class Bm1690Adapter(EmulatorAdapter):
    """BM1690 through ``libtpuv7_rt``: one worker runs every BM1690 library of this process."""

    chip = "bm1690"

    def _key(self) -> tuple[tuple[str, ...], list[str]]:
        return ("bm1690",), []


class Bm1684xAdapter(EmulatorAdapter):
    """BM1684X through ``libbmlib``: one worker per kernel library (see :mod:`tilelang_tpu.bmlib_worker`)."""

    chip = "bm1684x"

    def _key(self) -> tuple[tuple[str, ...], list[str]]:
        return ("bm1684x", str(self._build.library)), [str(self._build.library), self._symbol]


ADAPTERS = {"bm1690": Bm1690Adapter, "bm1684x": Bm1684xAdapter}


def create_adapter(kernel: CompiledKernel, toolchain: TpuToolchain) -> EmulatorAdapter:
    """Build (or reuse, verified) ``kernel``'s library and wrap it in the chip's adapter.

    On a tilelang disk-cache hit ``kernel.library_path`` is tilelang's copy of the
    library: it is never loaded itself; the verified library of the same key is (adopted
    from that copy, which tilelang checked against its manifest, when the store has no
    intact one), and the copy is repaired if it differs.
    """
    chip, mode = kernel.target["chip"], kernel.target["mode"]
    if mode != "cmodel":
        raise ToolchainError(PCIE_UNSUPPORTED)
    copy = Path(kernel.library_path) if kernel.library_path is not None else None
    built = build(kernel.source, kernel.name, chip, mode, toolchain, verified_copy=copy)
    if kernel.library_path is not None and built.artifact is not None:
        ArtifactStore.repair_copy(Path(kernel.library_path), built.artifact)
    return ADAPTERS[chip](kernel, built, toolchain)


__all__ = [
    "Bm1684xAdapter",
    "Bm1690Adapter",
    "Build",
    "EmulatorAdapter",
    "LocalMemoryError",
    "PplCompileError",
    "build",
    "close_workers",
    "create_adapter",
]
