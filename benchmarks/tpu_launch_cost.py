"""tilelang-tpu: the host cost of a launch, apart from the emulation.

    python benchmarks/tpu_launch_cost.py [--calls 30]

Needs the SophGo toolchain (`tilelang-tpu toolchain install`).  Caches go to a private temporary
directory.  For a 64 x 64 fp32 copy and a 1024 x 1024 fp32 add (``cores=1``), compiled once, then
called ``--calls`` times after a warm-up (the worker is started there), each call is split by
timing wrappers this script puts around the backend's functions (they call through):

  tilelang + tilecore   ``JITKernel.__call__`` down to the backend adapter: tilelang's call,
                        tilecore's Launcher (argument checks, output allocation)
  tpu adapter, host     the adapter in the user's process: the request header, writing the
                        tensors into the pipe, reading the outputs back, the fault-log check,
                        copying the outputs into the tensors
  emulator worker       waiting for the worker's reply: its copy-in into emulated memory, the
                        emulated run, its copy-out (no code of the launch path runs there)

Medians over the calls; the host cost is the first two rows.  There is no upstream tpu target to
compare with; the democpu and ``c`` rows of the same table come from benchmarks/call_overhead.py.
"""

# No `from __future__ import annotations`: T.prim_func evaluates the parameter annotations.
import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def kernels() -> dict[str, tuple[Any, Callable[[], list[Any]], Callable[..., Any]]]:
    import tilelang.language as T
    import torch

    @T.prim_func
    def copy(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=1) as _bx:
            a = T.alloc_shared((64, 64), "float32")
            T.copy(A[0, 0], a)
            T.copy(a, B[0, 0])

    M = N = 1024

    @T.prim_func
    def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 512, M // 64, threads=1) as (bx, by):
            a = T.alloc_shared((64, 512), "float32")
            b = T.alloc_shared((64, 512), "float32")
            T.copy(A[by * 64, bx * 512], a)
            T.copy(B[by * 64, bx * 512], b)
            for i, j in T.Parallel(64, 512):
                a[i, j] = a[i, j] + b[i, j]
            T.copy(a, C[by * 64, bx * 512])

    return {
        "copy 64x64 fp32": (copy, lambda: [torch.randn(64, 64)], lambda a: a),
        "add 1024x1024 fp32": (add, lambda: [torch.randn(M, N), torch.randn(M, N)], lambda a, b: a + b),
    }


class Clock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

        return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    from tilelang_tpu import setup

    from tilecore.kit.paths import private_tempdir

    os.environ.setdefault(setup.TOOLCHAIN_DIR_ENV, str(setup.install_root()))
    with private_tempdir("tpu-launch-cost-") as scratch:
        os.environ["TILELANG_CACHE_DIR"] = str(scratch / "tilelang")
        os.environ["TILECORE_CACHE_DIR"] = str(scratch / "tilecore")
        run(args.calls)


def run(calls: int) -> None:
    import tilelang
    import torch
    from tilelang_tpu import runtime

    clock = Clock()
    runtime.EmulatorAdapter.__call__ = clock.wrap("adapter", runtime.EmulatorAdapter.__call__)  # type: ignore[method-assign]
    runtime._Worker._expect_ok = clock.wrap("worker", runtime._Worker._expect_ok)  # type: ignore[method-assign]
    print("| kernel | call, median ms | tilelang + tilecore ms | tpu adapter, host ms | host cost ms | emulator worker ms | host share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (func, make_inputs, reference) in kernels().items():
        kernel = tilelang.compile(func, target="tpu:cores=1", out_idx=[-1])
        inputs = make_inputs()
        before = [t.clone() for t in inputs]
        out = kernel(*inputs)  # warm-up: starts the worker, loads the library
        if not torch.equal(out, reference(*inputs)) or not all(torch.equal(a, b) for a, b in zip(inputs, before, strict=True)):
            raise SystemExit(f"{name}: wrong result or an input changed")
        rows: list[tuple[float, float, float]] = []
        for _ in range(calls):
            clock.seconds.clear()
            start = time.perf_counter()
            kernel(*inputs)
            total = time.perf_counter() - start
            rows.append((total, clock.seconds["adapter"], clock.seconds["worker"]))
        total = statistics.median(r[0] for r in rows) * 1e3
        launcher = statistics.median(r[0] - r[1] for r in rows) * 1e3
        adapter = statistics.median(r[1] - r[2] for r in rows) * 1e3
        worker = statistics.median(r[2] for r in rows) * 1e3
        host = statistics.median(r[0] - r[2] for r in rows) * 1e3
        print(f"| {name} | {total:.2f} | {launcher:.3f} | {adapter:.3f} | {host:.3f} | {worker:.2f} | {host / total:.1%} |")
    print(f"\n{calls} calls per kernel after one warm-up; medians of each column (host cost = call - emulator worker).")


if __name__ == "__main__":
    main()
