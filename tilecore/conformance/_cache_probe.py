"""The second process of the disk-cache case.

Run as ``python -m tilecore.conformance._cache_probe TARGET KERNEL STYLE [FRESH_DIR]`` with
the same ``TILELANG_CACHE_DIR`` as the first process (``FRESH_DIR``: ``TILECORE_CACHE_DIR``
once the target's toolchain is set up, so the backend's own build stores are empty).  It compiles the same named
kernel again, runs it against torch, and prints one JSON line saying whether
tilelang compiled (its "begins to compile" log record, emitted for every real
compile when ``TILELANG_PRINT_ON_COMPILATION=1``, never for a disk load), which
processes were started while the kernel was loaded (``started``: the backend's
compiler -- a host C++ compiler, a vendor's compile script -- is a process; seen through
Python's audit events, so nothing is replaced) and where the kernel's cache entry is.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

from tilecore.kit.paths import cache_root


class _CompileRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "begins to compile kernel" in message:
            self.messages.append(message)


#: Audit events of every way Python starts a program (subprocess, os.exec*, os.posix_spawn, os.system).
_SPAWNS = {"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.fork", "os.forkpty"}


class _Starts:
    """The programs started while ``watching`` is on (an audit hook cannot be removed: it is switched)."""

    def __init__(self) -> None:
        self.watching = False
        self.seen: list[str] = []

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if self.watching and event in _SPAWNS:
            self.seen.append(f"{event}: {str(args[1] if event == 'subprocess.Popen' else args[0])[:300]}")


def _without_build_stores(root: Path, fresh: Path) -> Path:
    """``fresh``: tilecore's cache folder ``root`` with every build store (a folder of
    :class:`tilecore.kit.artifacts.ArtifactStore` entries, ``<key>/artifact.json``) empty and the
    rest (a toolchain installed there, say) linked as it is."""
    for backend in (d for d in root.iterdir() if d.is_dir()) if root.is_dir() else ():
        (fresh / backend.name).mkdir(parents=True)
        for part in backend.iterdir():
            is_store = part.is_dir() and any((entry / "artifact.json").is_file() for entry in part.iterdir() if entry.is_dir())
            if is_store:
                (fresh / backend.name / part.name).mkdir()
            else:
                (fresh / backend.name / part.name).symlink_to(part)
    fresh.mkdir(parents=True, exist_ok=True)
    return fresh


def main(argv: list[str]) -> int:
    target_text, name, style = argv[:3]
    fresh_store = argv[3] if len(argv) > 3 else ""
    os.environ["TILELANG_PRINT_ON_COMPILATION"] = "1"
    handler = _CompileRecords()
    logger = logging.getLogger("tilelang")
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)

    import tilecore
    from tilecore.conformance.runner import KernelBuilder

    target = tilecore.resolve_target(target_text)
    if target is None:  # the parent process resolved the same text, so this means a broken environment
        raise tilecore.UnknownTargetError(f"{target_text!r} is not a tilecore target in the cache-probe process")
    builder = KernelBuilder(target_text, target, style)
    tilecore.setup_target(target_text)  # the toolchain check (it may run the compiler's --version): not a build
    if fresh_store:
        os.environ["TILECORE_CACHE_DIR"] = str(_without_build_stores(cache_root(), Path(fresh_store)))
    starts = _Starts()
    sys.addaudithook(starts)
    starts.watching = True
    kernel = builder.get(name)  # a cache hit: the kernel is loaded, nothing is built
    starts.watching = False
    error = ""
    try:
        builder.check(name, seed=1)
    except AssertionError as err:
        error = str(err)
    print(
        json.dumps(
            {
                "compiled": handler.messages,
                "started": starts.seen,
                "cache_path": getattr(kernel, "_tilelang_cache_path", None),
                "mismatch": error,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
