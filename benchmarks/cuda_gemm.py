"""GEMM speed and per-call host cost: tilelang + tilecore + tilelang-cuda vs upstream tilelang alone vs torch.

One run measures, on the current NVIDIA GPU:

* fp16 GEMM 4096^3 and 8192^3 and bf16 GEMM 8192^3 (float32 accumulation) written
  with ``T.Kernel``/``T.alloc_shared``/``T.alloc_fragment``/``T.Pipelined(num_stages=3)``/
  ``T.copy``/``T.gemm`` at block 128x256x64 and 256 threads, timed with
  ``tilelang.profiler.do_bench`` (CUDA events, L2 flush) through
  (a) tilelang with tilecore and tilelang-cuda active (``target="cuda:<arch>"``, which
      only the plugin understands),
  (b) upstream tilelang alone (``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``, ``target="cuda"``),
  (c) ``torch.matmul``;
  plus each kernel's own profiler (``kernel.get_profiler().do_bench``): the plugin's
  CUDA-event timer in (a), upstream's ``Profiler`` in (b);
* the host cost of one call of a tiny compiled kernel (1024-element add) through
  (a) and (b), against ``torch.add``: wall time of a loop of calls, ended by one
  synchronisation, divided by the number of calls (best of five loops), split
  into the layers of the call (``JITKernel.__call__``, the adapter's Python
  wrapper, the raw TVM-FFI function).

(a) and (b) run in separate worker processes (tilecore patches tilelang when
imported, so "upstream alone" needs a fresh interpreter), alternating A B B A
over ``--rounds`` rounds; each mode keeps one private TILELANG_CACHE_DIR across
its rounds, so round 1 compiles cold and later rounds load from the disk cache.
Inside a worker, the kernel, torch and profiler timings are interleaved
``REPEATS`` times and the medians kept; each worker times torch too, so ratios
are also reported normalised by the torch time of the same worker (clock drift
between workers cancels).

Usage:  python benchmarks/cuda_gemm.py [--rounds 4] [--json results.json]
Writes nothing in the current directory; JSON only where --json says.
"""

# No `from __future__ import annotations`: T.prim_func evaluates the parameter annotations.
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

CASES = (("float16", 4096), ("float16", 8192), ("bfloat16", 8192))
BLOCK_M, BLOCK_N, BLOCK_K, THREADS, STAGES = 128, 256, 64, 256, 3
TINY_N = 1024
MODES = ("tilecore", "upstream")
REPEATS = 3  # interleaved do_bench calls per column and case; the median is kept


# ------------------------------------------------------------------------------------------
# Worker: one interpreter, one mode
# ------------------------------------------------------------------------------------------


def gemm_program(M: int, N: int, K: int, dtype: str) -> Any:
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=THREADS) as (bx, by):
            A_shared = T.alloc_shared((BLOCK_M, BLOCK_K), dtype)
            B_shared = T.alloc_shared((BLOCK_K, BLOCK_N), dtype)
            C_local = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=STAGES):
                T.copy(A[by * BLOCK_M, k * BLOCK_K], A_shared)
                T.copy(B[k * BLOCK_K, bx * BLOCK_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * BLOCK_M, bx * BLOCK_N])

    return main


def add_program(N: int) -> Any:
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]

    return main


def host_cost_us(call: Any, calls: int) -> float:
    """Best of five: wall time of ``calls`` back-to-back calls plus one final synchronisation, per call."""
    import torch

    for _ in range(200):
        call()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def worker(mode: str, calls: int) -> dict[str, Any]:
    import tilelang
    import torch
    from tilelang.profiler import do_bench

    device = torch.device("cuda", torch.cuda.current_device())
    result: dict[str, Any] = {"mode": mode, "cases": {}}
    if mode == "upstream":
        assert "tilecore" not in sys.modules, "upstream mode must run without tilecore"
        target = "cuda"
    else:
        import tilecore

        resolved = tilecore.resolve_target("cuda")
        assert resolved is not None and resolved.distribution == "tilelang-cuda", resolved
        target = f"cuda:{resolved['arch']}"
        result["plugin"] = f"{resolved.owner}; toolchain {tilecore.setup_target(resolved)}"
    result["target_arg"] = target

    for dtype, size in CASES:
        torch_dtype = getattr(torch, dtype)
        start = time.perf_counter()
        kernel = tilelang.compile(gemm_program(size, size, size, dtype), target=target)
        compile_s = time.perf_counter() - start
        profiler_cls = type(kernel.get_profiler()).__name__
        if mode == "tilecore":
            assert profiler_cls == "TilecoreProfiler", "the kernel must be owned by the tilelang-cuda plugin"
        a = torch.randn(size, size, dtype=torch_dtype, device=device)
        b = torch.randn(size, size, dtype=torch_dtype, device=device)
        c = torch.empty(size, size, dtype=torch_dtype, device=device)
        ref = torch.empty_like(c)
        kernel(a, b, c)
        torch.matmul(a, b, out=ref)
        exact = a.float() @ b.float()
        torch.cuda.synchronize()
        profiler = kernel.get_profiler()
        samples: dict[str, list[float]] = {"kernel_ms": [], "torch_ms": [], "profiler_ms": []}
        for _ in range(REPEATS):  # interleaved, so clock drift hits every column alike
            samples["kernel_ms"].append(do_bench(lambda k=kernel, a=a, b=b, c=c: k(a, b, c), warmup=25, rep=200))
            samples["torch_ms"].append(do_bench(lambda a=a, b=b, ref=ref: torch.matmul(a, b, out=ref), warmup=25, rep=200))
            samples["profiler_ms"].append(profiler.do_bench(input_tensors=[a, b, c], warmup=25, rep=200))
        case: dict[str, Any] = {
            "compile_s": compile_s,
            "rel_err_vs_fp32": ((c.float() - exact).norm() / exact.norm()).item(),
            "torch_rel_err_vs_fp32": ((ref.float() - exact).norm() / exact.norm()).item(),
            "target": str(kernel.target),
            "source_sha256": hashlib.sha256(kernel.get_kernel_source().encode()).hexdigest(),
            "execution_backend": kernel.execution_backend,
            "profiler": profiler_cls,
            **{key: statistics.median(values) for key, values in samples.items()},
            "samples": samples,
        }
        del a, b, c, ref, exact
        torch.cuda.empty_cache()
        result["cases"][f"{dtype} {size}^3"] = case

    tiny = tilelang.compile(add_program(TINY_N), target=target)
    x, y = torch.randn(TINY_N, device=device), torch.randn(TINY_N, device=device)
    z, w = torch.empty_like(x), torch.empty_like(x)
    tiny(x, y, z)
    torch.add(x, y, out=w)
    torch.cuda.synchronize()
    assert torch.equal(z, w), "tiny kernel result differs from torch.add"
    executable = tiny.adapter._get_executable()  # upstream's TVM-FFI function under the Python wrapper
    result["host_us"] = {
        "kernel": host_cost_us(lambda: tiny(x, y, z), calls),
        "adapter_func": host_cost_us(lambda: tiny.adapter.func(x, y, z), calls),
        "ffi_executable": host_cost_us(lambda: executable(x, y, z), calls),
        "torch_add": host_cost_us(lambda: torch.add(x, y, out=w), calls),
    }
    result["device"] = torch.cuda.get_device_name(device)
    result["versions"] = {"tilelang": tilelang.__version__, "torch": torch.__version__, "cuda": torch.version.cuda}
    return result


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------


def run_worker(mode: str, cache_dir: str, calls: int) -> dict[str, Any]:
    env = dict(os.environ, TILELANG_CACHE_DIR=cache_dir, PYTHONUNBUFFERED="1")
    env.pop("TILECORE_PLUGINS", None)
    if mode == "upstream":
        env["TILECORE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    else:
        env.pop("TILECORE_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", mode, "--calls", str(calls)],
        env=env,
        capture_output=True,
        text=True,
        cwd=cache_dir,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} worker failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tflops(size: int, ms: float) -> float:
    return 2 * size**3 / (ms * 1e-3) / 1e12


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds; ratios both raw and normalised by the torch time measured in the same worker."""
    by_mode = {mode: [r for r in runs if r["mode"] == mode] for mode in MODES}
    pairs = list(zip(by_mode["tilecore"], by_mode["upstream"], strict=True))
    cases = {}
    for name in by_mode["tilecore"][0]["cases"]:
        size = int(name.split()[1].split("^")[0])

        def med(mode: str, key: str, name: str = name) -> float:
            return statistics.median(r["cases"][name][key] for r in by_mode[mode])

        tc, up = med("tilecore", "kernel_ms"), med("upstream", "kernel_ms")
        torch_ms = statistics.median(r["cases"][name]["torch_ms"] for r in runs)
        raw = [t["cases"][name]["kernel_ms"] / u["cases"][name]["kernel_ms"] for t, u in pairs]
        normalised = [
            (t["cases"][name]["kernel_ms"] / t["cases"][name]["torch_ms"]) / (u["cases"][name]["kernel_ms"] / u["cases"][name]["torch_ms"])
            for t, u in pairs
        ]
        cases[name] = {
            "tilecore_ms": tc,
            "upstream_ms": up,
            "torch_ms": torch_ms,
            "tilecore_tflops": tflops(size, tc),
            "upstream_tflops": tflops(size, up),
            "torch_tflops": tflops(size, torch_ms),
            "ratio_tilecore_over_upstream": statistics.median(raw),
            "ratio_tilecore_over_upstream_torch_normalised": statistics.median(normalised),
            "ratio_upstream_over_torch": up / torch_ms,
            "per_round_ratio": raw,
            "per_round_ratio_torch_normalised": normalised,
            "profiler_ms": {
                "tilecore (plugin timer)": med("tilecore", "profiler_ms"),
                "upstream (Profiler.do_bench)": med("upstream", "profiler_ms"),
            },
            "compile_s": {m: [r["cases"][name]["compile_s"] for r in by_mode[m]] for m in MODES},
            "max_rel_err_vs_fp32": max(r["cases"][name]["rel_err_vs_fp32"] for r in runs),
            "torch_rel_err_vs_fp32": max(r["cases"][name]["torch_rel_err_vs_fp32"] for r in runs),
            "same_tvm_target": len({r["cases"][name]["target"] for r in runs}) == 1,
            "same_kernel_source": len({r["cases"][name]["source_sha256"] for r in runs}) == 1,
            "execution_backends": sorted({r["cases"][name]["execution_backend"] for r in runs}),
        }
    host: dict[str, Any] = {}
    for key in ("kernel", "adapter_func", "ffi_executable"):
        for mode in MODES:
            host[f"{mode}_{key}_us"] = statistics.median(r["host_us"][key] for r in by_mode[mode])
    host["torch_add_us"] = statistics.median(r["host_us"]["torch_add"] for r in runs)
    host["ratio_tilecore_over_upstream"] = host["tilecore_kernel_us"] / host["upstream_kernel_us"]
    host["ratio_tilecore_over_torch_add"] = host["tilecore_kernel_us"] / host["torch_add_us"]
    host["per_round_ratio"] = [t["host_us"]["kernel"] / u["host_us"]["kernel"] for t, u in pairs]
    return {"cases": cases, "host": host}


def print_table(summary: dict[str, Any], meta: dict[str, Any]) -> None:
    print(f"device: {meta['device']} | {meta['versions']} | rounds: {meta['rounds']}")
    print(f"plugin: {meta['plugin']}")
    head = (
        f"{'case':<16}{'(a) tilecore ms':>16}{'(b) upstream ms':>16}{'(c) torch ms':>13}{'(a) TFLOP/s':>12}{'(b) TFLOP/s':>12}"
        f"{'(c) TFLOP/s':>12}{'a/b':>7}{'a/b norm':>9}{'b/c':>7}"
    )
    print(head)
    print("-" * len(head))
    for name, c in summary["cases"].items():
        print(
            f"{name:<16}{c['tilecore_ms']:>16.4f}{c['upstream_ms']:>16.4f}{c['torch_ms']:>13.4f}"
            f"{c['tilecore_tflops']:>12.1f}{c['upstream_tflops']:>12.1f}{c['torch_tflops']:>12.1f}"
            f"{c['ratio_tilecore_over_upstream']:>7.3f}{c['ratio_tilecore_over_upstream_torch_normalised']:>9.3f}{c['ratio_upstream_over_torch']:>7.3f}"
        )
    print("a/b: median over rounds of (a) ms / (b) ms; a/b norm: the same with each worker's time divided by its own torch time")
    for name, c in summary["cases"].items():
        rounds = ", ".join(f"{r:.3f}" for r in c["per_round_ratio"])
        compile_s = "; ".join(f"{m} " + ", ".join(f"{s:.2f}" for s in v) for m, v in c["compile_s"].items())
        timers = "; ".join(f"{k} {v:.4f} ms" for k, v in c["profiler_ms"].items())
        print(
            f"{name}: a/b per round [{rounds}]; profiler timers: {timers}; compile s (round 1 cold, then disk cache): {compile_s}; "
            f"rel err vs fp32: kernel {c['max_rel_err_vs_fp32']:.2e}, torch {c['torch_rel_err_vs_fp32']:.2e}; "
            f"same TVM target: {c['same_tvm_target']}; same kernel source: {c['same_kernel_source']}; backend {c['execution_backends']}"
        )
    h = summary["host"]
    print(f"host cost per call, {TINY_N}-element add (median over rounds, us):")
    print(f"{'':<34}{'(a) tilecore':>13}{'(b) upstream':>13}")
    for key, label in (
        ("kernel", "kernel(x, y, z)  [JITKernel]"),
        ("adapter_func", "kernel.adapter.func(x, y, z)"),
        ("ffi_executable", "TVM-FFI executable(x, y, z)"),
    ):
        print(f"{label:<34}{h[f'tilecore_{key}_us']:>13.2f}{h[f'upstream_{key}_us']:>13.2f}")
    print(f"{'torch.add(x, y, out=z)':<34}{h['torch_add_us']:>13.2f}")
    rounds = ", ".join(f"{r:.3f}" for r in h["per_round_ratio"])
    print(f"a/b {h['ratio_tilecore_over_upstream']:.3f} (per round [{rounds}]); a/torch.add {h['ratio_tilecore_over_torch_add']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of (a) and (b) workers, alternating A B B A (default 4)")
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed loop of the host-cost measurement")
    parser.add_argument("--json", help="write the results as JSON to this path")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.calls)))
        return

    caches = {mode: tempfile.mkdtemp(prefix=f"cuda-gemm-bench-{mode}-") for mode in MODES}
    try:
        runs = []
        for index in range(args.rounds):
            order = ("upstream", "tilecore") if index % 2 == 0 else ("tilecore", "upstream")
            for mode in order:
                started = time.perf_counter()
                runs.append(run_worker(mode, caches[mode], args.calls))
                print(f"round {index + 1}: {mode} worker done in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        for path in caches.values():
            shutil.rmtree(path, ignore_errors=True)
    tilecore_run = next(r for r in runs if r["mode"] == "tilecore")
    meta = {
        "device": tilecore_run["device"],
        "versions": tilecore_run["versions"],
        "rounds": args.rounds,
        "plugin": tilecore_run["plugin"],
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }
    summary = summarize(runs)
    print_table(summary, meta)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "summary": summary, "runs": runs}, handle, indent=2)


if __name__ == "__main__":
    main()
