"""What a cache hit costs, by step: cold compile vs remote hit vs local hit, per backend.

    python benchmarks/cache_hit_steps.py [--targets democpu,tpu] [--kernels 8] [--redis-server PATH]
    python benchmarks/cache_hit_steps.py --targets cuda --redis-server /path/to/redis-server   # GPU machine

The same setup as ``benchmarks/remote_cache.py`` (three fresh interpreters per target, each with its
own empty local caches, one ``redis-server`` on loopback): machine A compiles cold and publishes,
machine B starts empty (every kernel a **remote hit**), machine B' reruns on B's cache (every
kernel a **local hit**).  Every process first compiles a warm-up kernel (first-compile setup, the
toolchain probe, the Redis connection), then ``--kernels`` distinct GEMMs of remote_cache.py's
sweep; each is checked against torch.

Each ``tilelang.compile`` is timed twice over: the plain total (``hit ms``), and split into steps
by timing wrappers this script puts around the functions a hit passes through (exclusive times:
a step nested in another is subtracted from it):

  resolve target   tilecore's resolution (string/dict -> declared target, TVM target -> declared
                   target, the memoised setup), wherever tilelang or the bridge asks for it
  cache key        tilelang's key (hashing the kernel's script) plus tilecore's salt
  remote fetch     the remote tier: fetch over loopback + verify signature and hashes
  remote install   the remote tier: atomic install into the local cache directory
  cache load       tilelang's disk-cache load (reading the entry, the manifest check)
  adapter          ``JITKernel.from_database``: the kernel object and its adapter (the backend's
                   ``tilecore_create_adapter`` with its artifact check, or upstream's library load)
  rest             everything else inside ``tilelang.compile`` (the prim_func's own construction
                   is outside: it is the user's code)

Besides the wall time, each compile's CPU time (``time.process_time``: every thread of the
process) and the fastest compile are printed: on a shared machine under load most of a hit's wall
time is waiting for a core, which the CPU time leaves out.

Then, outside the compile, the first call of the loaded kernel (the runtime handshake: for tpu,
starting the emulator worker and loading the library) and a steady call.  Finally the cost of
resolving the target string once everything is warm: ``tilecore.resolve_target(t)`` and
tilelang's ``determine_target(t)`` (string -> TVM target, what every compile does), mean of 500.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import remote_cache

STEPS = ("resolve target", "cache key", "remote fetch", "remote install", "cache load", "adapter", "rest")


class StepClock:
    """Exclusive wall time per step name: nested steps are charged to themselves, not to their caller."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._stack: list[list[Any]] = []

    def wrap(self, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                elapsed = time.perf_counter() - frame[0]
                self.totals[step] = self.totals.get(step, 0.0) + elapsed - frame[1]
                if self._stack:
                    self._stack[-1][1] += elapsed

        return timed

    def take(self) -> dict[str, float]:
        totals, self.totals = self.totals, {}
        return totals


def instrument(clock: StepClock) -> None:
    """Timing wrappers around the functions a hit passes through (measurement only; they call through)."""
    from tilelang.cache.kernel_cache import KernelCache
    from tilelang.jit.kernel import JITKernel

    from tilecore._registry import Registry

    for name in ("resolve_with_extra", "find_upstream", "setup"):  # resolve calls resolve_with_extra
        setattr(Registry, name, clock.wrap("resolve target", getattr(Registry, name)))
    KernelCache._generate_key = clock.wrap("cache key", KernelCache._generate_key)  # type: ignore[method-assign]
    KernelCache._load_kernel_from_disk = clock.wrap("cache load", KernelCache._load_kernel_from_disk)  # type: ignore[method-assign]
    from_database = JITKernel.from_database  # bound to the class
    JITKernel.from_database = classmethod(clock.wrap("adapter", lambda _cls, *a, **k: from_database(*a, **k)))  # type: ignore[method-assign,assignment]


def worker(target: str, count: int) -> None:
    import tilelang
    import torch

    from tilecore import remote

    profile = remote_cache.PROFILES[target]
    M, N, K = profile["shape"]
    dtype, style, device = profile["dtype"], profile["style"], profile["device"]
    clock = StepClock()
    instrument(clock)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    warm = tilelang.compile(remote_cache.warmup_kernel(96, 160, 128 if style == "gpu" else 1), target=target, out_idx=[-1])
    x = torch.randn(96, 160, device=device)
    assert torch.equal(warm(x), x)
    a = torch.randn(M, K, device=device).to(getattr(torch, dtype))
    b = torch.randn(K, N, device=device).to(getattr(torch, dtype))
    a0, b0, expected = a.clone(), b.clone(), a.float() @ b.float()
    for BM, BN, BK in remote_cache.configs(target, count)[1:]:
        func = remote_cache.matmul(M, N, K, BM, BN, BK, dtype, style)  # the user's code: not timed
        before = dict(remote.counters())
        clock.take()
        cpu_start, start = time.process_time(), time.perf_counter()
        kernel = tilelang.compile(func, target=target, out_idx=[-1])
        total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        steps = clock.take()
        after = remote.counters()
        fetch = (after.get("hit_fetch_verify_us", 0) - before.get("hit_fetch_verify_us", 0)) / 1e6
        install = (after.get("hit_install_us", 0) - before.get("hit_install_us", 0)) / 1e6
        steps["remote fetch"], steps["remote install"] = fetch, install
        steps["cache load"] = steps.get("cache load", 0.0) - fetch - install  # the tier runs inside the load
        steps["rest"] = total - sum(v for k, v in steps.items() if k != "rest")
        start = time.perf_counter()
        out = kernel(a, b)
        sync()
        first = time.perf_counter() - start
        start = time.perf_counter()
        kernel(a, b)
        sync()
        steady = time.perf_counter() - start
        err = ((out.float() - expected).abs().max() / expected.abs().max()).item()
        ok = err < (1e-2 if dtype == "float16" else 1e-5) and torch.equal(a, a0) and torch.equal(b, b0)
        print(
            "KERNEL " + json.dumps({"total": total, "cpu": cpu, "steps": steps, "first": first, "steady": steady, "ok": bool(ok)}),
            flush=True,
        )

    from tilelang.backend.target import determine_target

    import tilecore

    for label, fn in (("resolve_target", tilecore.resolve_target), ("determine_target", determine_target)):
        fn(target)
        start = time.perf_counter()
        for _ in range(500):
            fn(target)
        print("RESOLVE " + json.dumps({"name": label, "seconds": (time.perf_counter() - start) / 500}), flush=True)
    remote.flush(60)


def run(target: str, count: int, cache: Path, url: str) -> dict[str, Any]:
    env = remote_cache.machine_env(target, cache, url)
    proc = remote_cache.subprocess.run(
        [sys.executable, __file__, "--worker", target, "--kernels", str(count)], env=env, cwd=cache, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"{target} worker failed:\n{proc.stderr[-4000:]}")
    kernels = [json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("KERNEL ")]
    resolve = {d["name"]: d["seconds"] for d in (json.loads(ln[8:]) for ln in proc.stdout.splitlines() if ln.startswith("RESOLVE "))}
    return {"kernels": kernels, "resolve": resolve}


def table(target: str, runs: dict[str, dict[str, Any]]) -> list[str]:
    def med(machine: str, pick: Callable[[dict[str, Any]], float]) -> float:
        return statistics.median(pick(k) for k in runs[machine]["kernels"]) * 1e3

    def mean_step(machine: str, step: str) -> float:
        return statistics.fmean(k["steps"].get(step, 0.0) for k in runs[machine]["kernels"]) * 1e3

    cold = med("A", lambda k: k["total"])
    rows = [
        f"| {target} | step | cold (A) ms | remote hit (B) ms | local hit (B') ms |",
        "|---|---|---:|---:|---:|",
    ]
    for step in STEPS:
        rows.append(f"| {target} | {step} | {mean_step('A', step):.2f} | {mean_step('B', step):.2f} | {mean_step('B2', step):.2f} |")
    remote_ms, local_ms = med("B", lambda k: k["total"]), med("B2", lambda k: k["total"])
    rows.append(f"| {target} | **tilelang.compile, median** | **{cold:.1f}** | **{remote_ms:.2f}** | **{local_ms:.2f}** |")
    rows.append(f"| {target} | cold / hit | 1x | {cold / remote_ms:.0f}x | {cold / local_ms:.0f}x |")
    rows.append(
        f"| {target} | tilelang.compile, fastest | {min(k['total'] for k in runs['A']['kernels']) * 1e3:.2f} | "
        f"{min(k['total'] for k in runs['B']['kernels']) * 1e3:.2f} | {min(k['total'] for k in runs['B2']['kernels']) * 1e3:.2f} |"
    )
    rows.append(
        f"| {target} | tilelang.compile, CPU time of the process, median | {med('A', lambda k: k['cpu']):.2f} | "
        f"{med('B', lambda k: k['cpu']):.2f} | {med('B2', lambda k: k['cpu']):.2f} |"
    )
    rows.append(
        f"| {target} | first call (runtime handshake), median | {med('A', lambda k: k['first']):.2f} | "
        f"{med('B', lambda k: k['first']):.2f} | {med('B2', lambda k: k['first']):.2f} |"
    )
    rows.append(
        f"| {target} | steady call, median | {med('A', lambda k: k['steady']):.2f} | {med('B', lambda k: k['steady']):.2f} | "
        f"{med('B2', lambda k: k['steady']):.2f} |"
    )
    for name in ("resolve_target", "determine_target"):
        values = " | ".join(f"{runs[m]['resolve'][name] * 1e3:.3f}" for m in ("A", "B", "B2"))
        rows.append(f"| {target} | `{name}({target!r})`, warm, mean of 500 | {values} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default="democpu,tpu", help="comma-separated: democpu, tpu, cuda")
    parser.add_argument("--kernels", type=int, default=8, help="GEMM configs compiled per machine")
    parser.add_argument("--redis-server", default=None, help="redis-server binary (default: PATH, then /usr/bin/redis-server)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.kernels)
        return
    from tilecore.remote.localserver import LocalRedisServer

    work = Path(tempfile.mkdtemp(prefix="tilecore-hit-steps-"))
    lines: list[str] = []
    ok = True
    try:
        for target in [t.strip() for t in args.targets.split(",") if t.strip()]:
            server = LocalRedisServer(work / f"redis-{target}", binary=args.redis_server).start()
            try:
                runs = {
                    "A": run(target, args.kernels, work / target / "A", server.url),
                    "B": run(target, args.kernels, work / target / "B", server.url),
                    "B2": run(target, args.kernels, work / target / "B", server.url),
                }
            finally:
                server.stop()
            correct = all(k["ok"] for r in runs.values() for k in r["kernels"])
            # B fetched every kernel from Redis, B' none (its hits are local)
            tiers = all(k["steps"]["remote fetch"] > 0 for k in runs["B"]["kernels"]) and not any(
                k["steps"]["remote fetch"] for k in runs["A"]["kernels"] + runs["B2"]["kernels"]
            )
            ok &= correct and tiers
            lines += [
                *table(target, runs),
                "",
                f"- {target}: {args.kernels} kernels per machine; all results correct: {correct}; B remote hits only, A and B' none: {tiers}",
                "",
            ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    print(f"Python {sys.version.split()[0]}; steps are means over the kernels, totals medians.")
    if not ok:
        raise SystemExit("some results were wrong or served from the wrong tier")


if __name__ == "__main__":
    main()
