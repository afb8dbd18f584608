"""tilelang-tpu: compile time (cold vs cached) and emulator run time of a 1024x1024 fp32 add.

    python benchmarks/tpu_build_and_run.py [--runs 7] [--chip bm1690]

Needs the SophGo toolchain (`tilelang-tpu toolchain install`).  Every measurement
runs in a fresh interpreter with its own empty tilecore/tilelang caches (removed
afterwards), side by side in one invocation:

  build, hand-written PPL   runtime.build of tests/ppl/add_f32_1024.pl: ppl-compile + gcc (cold),
                            then the same call again (disk-cache hit)
  compile, TileLang         tilelang.compile(add, target="tpu") in a fresh process (cold: lower,
                            codegen, ppl-compile, gcc), then in a second fresh process sharing the
                            caches (tilelang's disk cache + ours: nothing is compiled)
  run                       one launch of each kernel on the emulator (copy-in, emulated execution,
                            copy-out), median of --runs after one warm-up; torch.add on the host as
                            a reference point
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
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PPL = ROOT / "plugins" / "tilelang_tpu" / "tests" / "ppl" / "add_f32_1024.pl"

PROGRAM = textwrap.dedent(
    """
    import json, statistics, sys, time
    t0 = time.perf_counter()
    import torch, tilelang, tilelang.language as T, tilecore
    from pathlib import Path
    from tilecore import CompiledKernel, TensorParam
    from tilecore._launch import Launcher
    from tilelang_tpu import runtime, setup
    imported = time.perf_counter() - t0
    chip, runs, ppl_path, what = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    M = N = 1024

    @T.prim_func
    def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 256, M // 64) as (bx, by):
            a = T.alloc_shared((64, 256), "float32")
            b = T.alloc_shared((64, 256), "float32")
            T.copy(A[by * 64, bx * 256], a)
            T.copy(B[by * 64, bx * 256], b)
            for i, j in T.Parallel(64, 256):
                a[i, j] = a[i, j] + b[i, j]
            T.copy(a, C[by * 64, bx * 256])

    def timed(fn):
        start = time.perf_counter(); out = fn(); return out, time.perf_counter() - start

    x, y = torch.randn(M, N), torch.randn(M, N)
    result = {"import_s": imported}
    if what == "handwritten":
        toolchain = setup.find_toolchain()
        source = Path(ppl_path).read_text()
        cold, result["build_cold_s"] = timed(lambda: runtime.build(source, "add", chip, "cmodel", toolchain))
        hit, result["build_cached_s"] = timed(lambda: runtime.build(source, "add", chip, "cmodel", toolchain))
        assert not cold.cached and hit.cached
        result["ppl_compile_s"], result["link_s"] = cold.ppl_compile_seconds, cold.link_seconds
        target = tilecore.resolve_target({"kind": "tpu", "chip": chip, "mode": "cmodel"})
        params = tuple(TensorParam(n, torch.float32, (M, N)) for n in "ABC")
        kernel = CompiledKernel("add", source, params, (2,), target)
        call = Launcher(kernel, runtime.create_adapter(kernel, toolchain))
    else:
        call, result["compile_s"] = timed(lambda: tilelang.compile(add, target=f"tpu:{chip}", out_idx=[-1]))
        result["ppl_compile_runs"] = runtime.ppl_compile_runs
    assert torch.equal(call(x, y), x + y)  # warm-up and check
    samples = [timed(lambda: call(x, y))[1] for _ in range(runs)]
    result["run_s"] = statistics.median(samples)
    result["torch_add_s"] = statistics.median(timed(lambda: torch.add(x, y))[1] for _ in range(runs))
    print("RESULT " + json.dumps(result))
    """
)


def measure(args: argparse.Namespace, what: str, caches: Path, work: Path) -> dict[str, float]:
    env = dict(os.environ, TILECORE_CACHE_DIR=str(caches / "tilecore"), TILELANG_CACHE_DIR=str(caches / "tilelang"))
    # Keep finding a toolchain installed in the user's real cache.
    if "TILELANG_TPU_TOOLCHAIN_DIR" not in env:
        from tilelang_tpu.setup import install_root

        env["TILELANG_TPU_TOOLCHAIN_DIR"] = str(install_root())
    script = work / "tpu_bench_program.py"
    script.write_text(PROGRAM)
    result = subprocess.run(
        [sys.executable, str(script), args.chip, str(args.runs), str(PPL), what],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{what} failed:\n{result.stderr[-4000:]}")
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--chip", default="bm1690", choices=["bm1690", "bm1684x"])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tpu-bench-"))
    try:
        hand = measure(args, "handwritten", work / "hand-caches", work)
        cold = measure(args, "tilelang", work / "tl-caches", work)
        warm = measure(args, "tilelang", work / "tl-caches", work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"tilelang-tpu, 1024x1024 fp32 add, chip {args.chip}, emulator (cmodel); medians of {args.runs} runs")
    print(f"{'measurement':52s} {'seconds':>9s}")
    rows = [
        ("build hand-written PPL, cold (ppl-compile + gcc)", hand["build_cold_s"]),
        ("  of which ppl-compile", hand["ppl_compile_s"]),
        ("  of which gcc (device library)", hand["link_s"]),
        ("build hand-written PPL, cached (disk hit)", hand["build_cached_s"]),
        ("tilelang.compile, cold process + empty caches", cold["compile_s"]),
        ("tilelang.compile, new process, warm disk caches", warm["compile_s"]),
        ("emulator run, hand-written PPL kernel", hand["run_s"]),
        ("emulator run, TileLang-generated kernel", statistics.median([cold["run_s"], warm["run_s"]])),
        ("torch.add on the host CPU (reference)", hand["torch_add_s"]),
    ]
    for label, seconds in rows:
        print(f"{label:52s} {seconds:9.4f}")
    print(f"ppl-compile runs: cold process {cold['ppl_compile_runs']}, warm process {warm['ppl_compile_runs']}")
    print(f"ratio cold/cached build (hand-written): {hand['build_cold_s'] / max(hand['build_cached_s'], 1e-9):.0f}x")
    print(f"ratio cold/cached tilelang.compile:      {cold['compile_s'] / warm['compile_s']:.1f}x")
    print(f"ratio generated/hand-written run:        {statistics.median([cold['run_s'], warm['run_s']]) / hand['run_s']:.2f}x")


if __name__ == "__main__":
    main()
