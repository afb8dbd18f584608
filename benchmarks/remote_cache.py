"""Remote compile cache: cold compile vs remote hit vs local hit, two "machines", one Redis.

    python benchmarks/remote_cache.py [--targets democpu,tpu] [--redis-server /usr/bin/redis-server]
                                      [--configs 16] [--no-fault]

Each "machine" is a fresh interpreter with its own empty local tilelang/tilecore
caches; all of them share one ``redis-server`` this script starts on a loopback
port (and stops).  Per target, side by side in one run:

  machine A   cold: compiles a single GEMM, then an autotuning sweep of --configs
              GEMM tile configurations (compile, run, check against torch, time,
              keep the fastest), publishing every entry to Redis
  machine B   the same work with an empty local cache: every kernel is a remote hit
  machine B'  the same work again on B's local cache: every kernel is a local hit
  fault       machine C runs the sweep with an empty local cache; Redis is killed
              (SIGKILL) after the 8th config; the sweep must finish, correct, with
              exactly one warning

Every process first compiles a small warm-up kernel (tilelang's first-compile setup,
the toolchain probe and the Redis connection are paid there, on both sides), so the
times below are per-kernel costs in a running process: the ``tilelang.compile`` call
only.  Every kernel's result is checked against torch on random data.  Prints a table;
on the GPU machine run ``--targets cuda --redis-server <path to a redis-server binary>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# ------------------------------------------------------------------------------------------
# The worker: one machine
# ------------------------------------------------------------------------------------------


def matmul(M: int, N: int, K: int, BM: int, BN: int, BK: int, dtype: str, style: str) -> Any:
    """tilecore's conformance GEMM (``portable`` or ``gpu`` kernel style), float32 accumulation."""
    from tilecore.conformance.kernels import gemm_kernel

    return gemm_kernel(M, N, K, BM, BN, BK, dtype, "float32", style)


def warmup_kernel(M: int, N: int, threads: int) -> Any:
    import tilelang.language as T

    @T.prim_func
    def copy(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32), threads=threads) as (bx, by):
            a = T.alloc_shared((32, 32), "float32")
            T.copy(A[by * 32, bx * 32], a)
            T.copy(a, B[by * 32, bx * 32])

    return copy


#: Per target: problem size, dtype, threads, the single kernel's config and the sweep's space.
PROFILES: dict[str, dict[str, Any]] = {
    "democpu": {
        "shape": (128, 128, 128),
        "dtype": "float32",
        "style": "portable",
        "device": "cpu",
        "tiles": [(bm, bn, bk) for bk in (32, 64) for bm in (16, 32, 64, 128) for bn in (16, 32, 64, 128)],
    },
    "tpu": {
        "shape": (128, 128, 128),
        "dtype": "float32",
        "style": "portable",
        "device": "cpu",
        "tiles": [(bm, bn, bk) for bk in (32, 64) for bm in (16, 32, 64, 128) for bn in (16, 32, 64, 128)],
    },
    "cuda": {
        "shape": (1024, 1024, 1024),
        "dtype": "float16",
        "style": "gpu",
        "device": "cuda",
        "tiles": [(bm, bn, bk) for bk in (32, 64) for bm in (32, 64, 128) for bn in (32, 64, 128)],
    },
}


def configs(target: str, count: int) -> list[tuple[int, int, int]]:
    """The single kernel's config first, then the sweep's ``count`` configs (all distinct)."""
    space = PROFILES[target]["tiles"]
    if len(space) < count + 1:
        raise SystemExit(f"{target}: only {len(space) - 1} configs in the sweep space, asked for {count}")
    return [space[-1], *space[:count]]


def worker(target: str, count: int) -> None:
    """Warm-up, single kernel, sweep; one JSON line per kernel on stdout."""
    import tilelang
    import torch

    from tilecore import remote

    profile = PROFILES[target]
    M, N, K = profile["shape"]
    dtype, style, device = profile["dtype"], profile["style"], profile["device"]
    tdtype = getattr(torch, dtype)

    def compile_timed(func: Any) -> tuple[Any, float]:
        before = dict(remote.counters())
        start = time.perf_counter()
        kernel = tilelang.compile(func, target=target, out_idx=[-1])
        seconds = time.perf_counter() - start
        after = remote.counters()
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        # hit: fetched; a lookup without a hit (miss, refusal, store failure) or a skipped one: compiled;
        # no lookup at all: the local tier (disk or tilelang's in-memory cache) had it.
        if delta.get("hits"):
            served = "remote"
        elif delta.get("lookups") or delta.get("skipped") or not remote.enabled():
            served = "compiled"
        else:
            served = "local"
        return kernel, seconds, served

    def emit(**data: Any) -> None:
        print("KERNEL " + json.dumps(data), flush=True)

    kernel, seconds, served = compile_timed(warmup_kernel(96, 160, 128 if style == "gpu" else 1))
    x = torch.randn(96, 160, device=device)
    emit(name="warm-up", seconds=seconds, served=served, ok=bool(torch.equal(kernel(x), x)))

    a = torch.randn(M, K, device=device).to(tdtype)
    b = torch.randn(K, N, device=device).to(tdtype)
    a0, b0 = a.clone(), b.clone()
    expected = a.float() @ b.float()

    def check(kernel: Any) -> tuple[bool, float]:
        out = kernel(a, b)
        start = time.perf_counter()
        kernel(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        run = time.perf_counter() - start
        err = ((out.float() - expected).abs().max() / expected.abs().max()).item()
        ok = err < (1e-2 if dtype == "float16" else 1e-5) and torch.equal(a, a0) and torch.equal(b, b0)
        return bool(ok), run

    BM, BN, BK = configs(target, 1)[0]
    kernel, seconds, served = compile_timed(matmul(M, N, K, BM, BN, BK, dtype, style))
    ok, _ = check(kernel)
    emit(name="single", seconds=seconds, served=served, ok=ok)
    sweep_start = time.perf_counter()
    best = None
    for index, (BM, BN, BK) in enumerate(configs(target, count)[1:]):
        kernel, seconds, served = compile_timed(matmul(M, N, K, BM, BN, BK, dtype, style))
        ok, run = check(kernel)
        best = min(best or (run, index), (run, index))
        emit(name=f"sweep[{index}] {BM}x{BN}x{BK}", seconds=seconds, served=served, ok=ok, run=run)
    emit(name="sweep total", seconds=time.perf_counter() - sweep_start, served="-", ok=True, best=best[1] if best else None)
    start = time.perf_counter()
    drained = remote.flush(60)
    emit(name="publish flush", seconds=time.perf_counter() - start, served="-", ok=drained)
    print("COUNTERS " + json.dumps(remote.counters()), flush=True)


# ------------------------------------------------------------------------------------------
# The orchestrator
# ------------------------------------------------------------------------------------------


def run_machine(target: str, count: int, cache: Path, url: str | None, kill_after: int | None = None, server: Any = None) -> dict[str, Any]:
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("TILECORE_REMOTE_CACHE"):
            del env[name]
    env.update(TILELANG_CACHE_DIR=str(cache / "tilelang"), TILECORE_CACHE_DIR=str(cache / "tilecore"), TMPDIR=str(cache / "tmp"))
    if target == "tpu" and "TILELANG_TPU_TOOLCHAIN_DIR" not in env:
        # The installed SophGo toolchain stays where `tilelang-tpu toolchain install` put it;
        # everything else the backend builds goes to the machine's own tilecore cache.
        from tilecore.kit.paths import cache_root

        env["TILELANG_TPU_TOOLCHAIN_DIR"] = str(cache_root() / "tpu" / "toolchain")
    if url:
        env["TILECORE_REMOTE_CACHE"] = url
    (cache / "tmp").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", target, "--configs", str(count)],
        env=env,
        cwd=cache,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    kernels: list[dict[str, Any]] = []
    counters: dict[str, int] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("KERNEL "):
            kernels.append(json.loads(line[7:]))
            sweeps = sum(1 for k in kernels if k["name"].startswith("sweep["))
            if kill_after is not None and sweeps == kill_after and server is not None:
                server.kill()
        elif line.startswith("COUNTERS "):
            counters = json.loads(line[9:])
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.wait() != 0:
        raise SystemExit(f"{target} worker failed:\n{stderr[-4000:]}")
    warnings = [ln for ln in stderr.splitlines() if "tilecore remote cache" in ln]
    return {"kernels": {k["name"]: k for k in kernels}, "counters": counters, "warnings": warnings}


def summarize(target: str, runs: dict[str, dict[str, Any]], count: int) -> list[str]:
    cold, remote_, local_ = runs["A"]["kernels"], runs["B"]["kernels"], runs["B2"]["kernels"]
    sweep_names = [n for n in cold if n.startswith("sweep[")]

    def compile_sum(kernels: dict[str, Any]) -> float:
        return sum(kernels[n]["seconds"] for n in sweep_names)

    rows = []
    for label, name in (("single GEMM", "single"),):
        c, r, lo = cold[name]["seconds"], remote_[name]["seconds"], local_[name]["seconds"]
        rows.append(f"| {target} | {label} | {c * 1e3:.0f} | {r * 1e3:.1f} | {lo * 1e3:.1f} | {c / r:.0f}x | {c / lo:.0f}x |")
    per_cold = statistics.median(cold[n]["seconds"] for n in sweep_names)
    per_remote = statistics.median(remote_[n]["seconds"] for n in sweep_names)
    per_local = statistics.median(local_[n]["seconds"] for n in sweep_names)
    rows.append(
        f"| {target} | sweep, median per config | {per_cold * 1e3:.0f} | {per_remote * 1e3:.1f} | {per_local * 1e3:.1f} | {per_cold / per_remote:.0f}x | {per_cold / per_local:.0f}x |"
    )
    cs, rs, ls = compile_sum(cold), compile_sum(remote_), compile_sum(local_)
    rows.append(
        f"| {target} | sweep of {count}, compile total | {cs * 1e3:.0f} | {rs * 1e3:.0f} | {ls * 1e3:.0f} | {cs / rs:.0f}x | {cs / ls:.0f}x |"
    )
    ct, rt, lt = cold["sweep total"]["seconds"], remote_["sweep total"]["seconds"], local_["sweep total"]["seconds"]
    rows.append(
        f"| {target} | sweep of {count}, wall (compile+run+check) | {ct * 1e3:.0f} | {rt * 1e3:.0f} | {lt * 1e3:.0f} | {ct / rt:.1f}x | {ct / lt:.1f}x |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default="democpu,tpu", help="comma-separated: democpu, tpu, cuda")
    parser.add_argument("--redis-server", default=None, help="redis-server binary (default: PATH, then /usr/bin/redis-server)")
    parser.add_argument("--configs", type=int, default=16, help="configs in the autotuning sweep (>= 16)")
    parser.add_argument("--no-fault", action="store_true", help="skip the kill-Redis-mid-sweep run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.configs)
        return
    from tilecore.remote.localserver import LocalRedisServer

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in PROFILES]
    if unknown:
        raise SystemExit(f"unknown targets {unknown}; known: {', '.join(PROFILES)}")
    work = Path(tempfile.mkdtemp(prefix="tilecore-remote-bench-"))
    table = [
        "| target | kernel(s) | cold ms | remote hit ms | local hit ms | cold/remote | cold/local |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    ok = True
    try:
        for target in targets:
            server = LocalRedisServer(work / f"redis-{target}", binary=args.redis_server).start()
            try:
                runs = {
                    "A": run_machine(target, args.configs, work / target / "A", server.url),
                    "B": run_machine(target, args.configs, work / target / "B", server.url),
                    "B2": run_machine(target, args.configs, work / target / "B", server.url),
                }
                served = {
                    m: {k["served"] for n, k in r["kernels"].items() if n == "single" or n.startswith("sweep[")} for m, r in runs.items()
                }
                correct = all(k["ok"] for r in runs.values() for k in r["kernels"].values())
                expect = {"A": {"compiled"}, "B": {"remote"}, "B2": {"local"}}
                table += summarize(target, runs, args.configs)
                notes.append(
                    f"{target}: served {served} (expected {expect}); all results correct: {correct}; "
                    f"A published {runs['A']['counters'].get('published', 0)} entries, "
                    f"{runs['A']['counters'].get('bytes_out', 0) / max(1, runs['A']['counters'].get('published', 1)) / 1024:.1f} KiB each; "
                    f"publish flush at A's end {runs['A']['kernels']['publish flush']['seconds'] * 1e3:.0f} ms; warnings {sum(len(r['warnings']) for r in runs.values())}"
                )
                hits = max(1, runs["B"]["counters"].get("hits", 0))
                notes.append(
                    f"{target}: the remote tier's own share of a hit on machine B (mean of {hits}): fetch+verify "
                    f"{runs['B']['counters'].get('hit_fetch_verify_us', 0) / hits / 1e3:.1f} ms, atomic install "
                    f"{runs['B']['counters'].get('hit_install_us', 0) / hits / 1e3:.1f} ms; the rest of a remote hit is the local hit (the backend loading the entry)"
                )
                ok &= correct and served == expect
                if not args.no_fault:
                    fault = run_machine(target, args.configs, work / target / "C", server.url, kill_after=8, server=server)
                    kinds = [fault["kernels"][n]["served"] for n in fault["kernels"] if n.startswith("sweep[")]
                    fault_ok = all(k["ok"] for k in fault["kernels"].values())
                    notes.append(
                        f"{target} fault run (Redis SIGKILLed after sweep config 8): served {' '.join(k[0] for k in kinds)} "
                        f"(r=remote, c=compiled); all results correct: {fault_ok}; warnings: {len(fault['warnings'])}"
                        + (f" -> {fault['warnings'][0].split('WARNING', 1)[-1].strip()[:200]}" if fault["warnings"] else "")
                    )
                    ok &= fault_ok and len(fault["warnings"]) == 1
            finally:
                server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(table))
    print()
    for note in notes:
        print("- " + note)
    print(f"\nPython {sys.version.split()[0]}, {os.cpu_count()} CPUs; times are single runs of tilelang.compile per kernel.")
    if not ok:
        raise SystemExit("some results were wrong, served from the wrong tier, or the fault run did not warn exactly once")


if __name__ == "__main__":
    main()
