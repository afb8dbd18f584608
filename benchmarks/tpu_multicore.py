"""tilelang-tpu: one kernel on 1 vs 2, 4 and 8 BM1690 cores (``tpu:cores=N``), side by side on the emulator.

    python benchmarks/tpu_multicore.py [--runs 5] [--cores 1 2 4 8] [--kernels add small_add matmul softmax]

Needs the SophGo toolchain (`tilelang-tpu toolchain install`).  Each kernel is
compiled once per core count; every build is first checked against torch and
against the one-core build (bitwise: the cores split the grid, they do not change
the arithmetic).  Then the builds are launched in alternating order (the starting
build rotates every round) on the same inputs, and per core count the script
prints the median emulator wall time of one launch (copy-in + emulated execution
+ copy-out), its ratio to one core, and the CPU time the emulator worker process
used per launch (user + system, from /proc) divided by the wall time: about 1
means the emulated cores ran one after another on one host thread, N means N host
threads worked at once.  Also printed: the worker's thread count.

The emulator exposes no cycle counters through the runtime API the backend uses
(libtpuv7_rt), so wall time is the only measure; emulator wall time is not device
time.  Caches go to a private temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _kernels(T: Any) -> dict[str, tuple[Any, Callable[..., Any], list[tuple[tuple[int, ...], str]]]]:
    """name -> (prim_func, torch reference of the inputs, [(shape, dtype) of each parameter])."""
    import torch

    M, N = 1024, 1000  # 1000 columns: the last column block overhangs

    @T.prim_func
    def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 64), threads=1) as (bx, by):
            a = T.alloc_shared((64, 256), "float32")
            b = T.alloc_shared((64, 256), "float32")
            c = T.alloc_fragment((64, 256), "float32")
            T.copy(A[by * 64, bx * 256], a)
            T.copy(B[by * 64, bx * 256], b)
            for i, j in T.Parallel(64, 256):
                c[i, j] = a[i, j] * b[i, j] + a[i, j]
            T.copy(c, C[by * 64, bx * 256])

    m, n = 130, 200  # the size of the test suite's kernels: 2 x 3 blocks

    @T.prim_func
    def small_add(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, 128), T.ceildiv(m, 64), threads=1) as (bx, by):
            a = T.alloc_shared((64, 128), "float32")
            b = T.alloc_shared((64, 128), "float32")
            c = T.alloc_fragment((64, 128), "float32")
            T.copy(A[by * 64, bx * 128], a)
            T.copy(B[by * 64, bx * 128], b)
            for i, j in T.Parallel(64, 128):
                c[i, j] = a[i, j] * b[i, j] + a[i, j]
            T.copy(c, C[by * 64, bx * 128])

    S = 512

    @T.prim_func
    def matmul(A: T.Tensor((S, S), "float16"), B: T.Tensor((S, S), "float16"), C: T.Tensor((S, S), "float32")):
        with T.Kernel(S // 128, S // 128, threads=1) as (bx, by):
            a = T.alloc_shared((128, 64), "float16")
            b = T.alloc_shared((64, 128), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            for k in T.Pipelined(S // 64, num_stages=2):
                T.copy(A[by * 128, k * 64], a)
                T.copy(B[k * 64, bx * 128], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * 128, bx * 128])

    R, W = 1000, 512

    @T.prim_func
    def softmax(X: T.Tensor((R, W), "float32"), Y: T.Tensor((R, W), "float32")):
        with T.Kernel(T.ceildiv(R, 64), threads=1) as bx:
            x = T.alloc_shared((64, W), "float32")
            y = T.alloc_fragment((64, W), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.copy(X[bx * 64, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(64, W):
                y[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(y, s, dim=1)
            for i, j in T.Parallel(64, W):
                y[i, j] = y[i, j] / s[i]
            T.copy(y, Y[bx * 64, 0])

    return {
        "add": (add, lambda a, b: a * b + a, [((M, N), "float32")] * 3),
        "small_add": (small_add, lambda a, b: a * b + a, [((m, n), "float32")] * 3),
        "matmul": (matmul, lambda a, b: a.float() @ b.float(), [((S, S), "float16")] * 2 + [((S, S), "float32")]),
        "softmax": (softmax, lambda x: torch.softmax(x, dim=1), [((R, W), "float32")] * 2),
    }


def _worker_pid() -> int | None:
    """The emulator worker process (a child of this process), if one is running."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    pids = [int(p) for p in children.read_text().split()] if children.exists() else []
    for pid in pids:
        try:
            if b"tilelang_tpu.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def _cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed launches per core count (median reported)")
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--kernels", nargs="+", default=["add", "small_add", "matmul", "softmax"])
    args = parser.parse_args()
    from tilelang_tpu import setup

    from tilecore.kit.paths import private_tempdir

    # The caches move to a scratch directory; the installed toolchain must still be found.
    os.environ.setdefault(setup.TOOLCHAIN_DIR_ENV, str(setup.install_root()))
    os.environ.setdefault("TILELANG_TPU_IDLE_TIMEOUT", "600")  # one worker for the whole run
    with private_tempdir("tpu-multicore-") as scratch:
        os.environ["TILELANG_CACHE_DIR"] = str(scratch / "tilelang")
        os.environ["TILECORE_CACHE_DIR"] = str(scratch / "tilecore")
        _run(args)


def _run(args: argparse.Namespace) -> None:
    import tilelang
    import tilelang.language as T
    import torch

    cores = sorted(set(args.cores) | {1})
    kernels = _kernels(T)
    print(f"BM1690 emulator, median of {args.runs} launches per core count in alternating order")
    print(f"{'kernel':<9} {'cores':>5} {'blocks/core':>11} {'wall ms':>9} {'vs 1 core':>9} {'worker cpu/wall':>15} {'threads':>7}")
    for name in args.kernels:
        func, reference, params = kernels[name]
        torch.manual_seed(0)
        inputs = [torch.randn(shape).to(getattr(torch, dtype)) for shape, dtype in params]
        built = {n: tilelang.compile(func, target=f"tpu:cores={n}") for n in cores}
        outputs: dict[int, Any] = {}
        for n, kernel in built.items():
            tensors = [t.clone() for t in inputs]
            tensors[-1].zero_()
            kernel(*tensors)
            outputs[n] = tensors[-1]
        expected = reference(*inputs[:-1])
        for n, out in outputs.items():
            torch.testing.assert_close(out, expected.to(out.dtype), rtol=1e-3, atol=1e-3)
            assert torch.equal(out, outputs[1]), f"{name}: {n} cores differ from one core"
        walls: dict[int, list[float]] = {n: [] for n in cores}
        cpus: dict[int, list[float]] = {n: [] for n in cores}
        threads: dict[int, int] = {}
        for run in range(args.runs):
            order = cores[run % len(cores) :] + cores[: run % len(cores)]
            for n in order:
                tensors = [t.clone() for t in inputs]
                pid = _worker_pid()
                cpu = _cpu_seconds(pid)
                started = time.perf_counter()
                built[n](*tensors)
                walls[n].append(time.perf_counter() - started)
                pid = pid or _worker_pid()
                cpus[n].append(_cpu_seconds(pid) - cpu)
                if pid is not None:
                    threads[n] = len(os.listdir(f"/proc/{pid}/task"))
        base = statistics.median(walls[1])
        blocks = {"add": 4 * 16, "small_add": 6, "matmul": 16, "softmax": 16}[name]
        for n in cores:
            wall = statistics.median(walls[n])
            share = f"{-(-blocks // n)}" + (f" ({blocks} cores)" if blocks < n else "")
            ratio = statistics.median(c / w for c, w in zip(cpus[n], walls[n], strict=True))
            print(f"{name:<9} {n:>5} {share:>11} {wall * 1e3:>9.1f} {wall / base:>8.2f}x {ratio:>15.2f} {threads.get(n, 0):>7}")


if __name__ == "__main__":
    main()
