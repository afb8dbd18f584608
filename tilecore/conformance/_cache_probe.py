"""The second process of the disk-cache case.

Run as ``python -m tilecore.conformance._cache_probe TARGET KERNEL STYLE`` with the
same ``TILELANG_CACHE_DIR`` as the first process.  It compiles the same named
kernel again, runs it against torch, and prints one JSON line saying whether
tilelang compiled (its "begins to compile" log record, emitted for every real
compile when ``TILELANG_PRINT_ON_COMPILATION=1``, never for a disk load) and
where the kernel's cache entry is.
"""

from __future__ import annotations

import json
import logging
import os
import sys


class _CompileRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "begins to compile kernel" in message:
            self.messages.append(message)


def main(argv: list[str]) -> int:
    target_text, name, style = argv
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
    kernel = builder.get(name)
    error = ""
    try:
        builder.check(name, seed=1)
    except AssertionError as err:
        error = str(err)
    print(
        json.dumps(
            {
                "compiled": handler.messages,
                "cache_path": getattr(kernel, "_tilelang_cache_path", None),
                "mismatch": error,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
