"""Per-call host cost of a compiled tiny kernel: through tilecore's bridge vs upstream.

    python benchmarks/call_overhead.py [--calls 20000]

Three measurements, each in a fresh interpreter, printed side by side:
  (a) target "c" (upstream cython adapter) with tilecore active,
  (b) the same with TILECORE_DISABLE_PLUGIN_AUTOLOAD=1 (pure upstream),
  (c) target "democpu" (tilecore Launcher: argument checks, output allocation, ctypes adapter),
plus torch.add on the same tensors as a floor.  Best of 5 rounds each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

PROGRAM = textwrap.dedent(
    """
    import json, sys, timeit
    import tilelang, tilelang.language as T, torch
    M, N = 8, 8
    @T.prim_func
    def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((M, N), "float32")
            b = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            for i, j in T.Parallel(M, N):
                a[i, j] = a[i, j] + b[i, j]
            T.copy(a, C[0, 0])
    target, calls = sys.argv[1], int(sys.argv[2])
    k = tilelang.compile(add, target=target, out_idx=[-1])
    x, y = torch.randn(M, N), torch.randn(M, N)
    assert torch.allclose(k(x, y), x + y)
    best = lambda f: min(timeit.repeat(f, number=calls, repeat=5)) / calls * 1e6
    print(json.dumps({"kernel_us": best(lambda: k(x, y)), "torch_add_us": best(lambda: torch.add(x, y)),
                      "torch_empty_us": best(lambda: torch.empty(M, N))}))
    """
)


def measure(target: str, autoload: bool, calls: int, cwd: str) -> dict[str, float]:
    env = dict(os.environ, TILECORE_DISABLE_PLUGIN_AUTOLOAD="" if autoload else "1")
    script = os.path.join(cwd, "call_overhead_program.py")
    with open(script, "w") as handle:
        handle.write(PROGRAM)
    result = subprocess.run([sys.executable, script, target, str(calls)], env=env, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tilecore-bench-") as cwd:
        os.environ.setdefault("TILELANG_CACHE_DIR", os.path.join(cwd, "tilelang-cache"))
        os.environ.setdefault("TILECORE_CACHE_DIR", os.path.join(cwd, "tilecore-cache"))
        os.environ["TMPDIR"] = cwd  # upstream's cython adapter leaves build files in the temp dir
        rows = {
            "(a) 'c' via tilecore": measure("c", True, args.calls, cwd),
            "(b) 'c' upstream only": measure("c", False, args.calls, cwd),
            "(c) 'democpu' Launcher": measure("democpu", True, args.calls, cwd),
        }
    base = rows["(b) 'c' upstream only"]["kernel_us"]
    print("per call, out_idx output allocated by the kernel (best of 5 rounds)")
    print(f"{'path':26s} {'k(x, y) us':>11s} {'torch.add us':>13s} {'torch.empty us':>15s} {'ratio vs (b)':>13s}")
    for name, r in rows.items():
        print(f"{name:26s} {r['kernel_us']:11.2f} {r['torch_add_us']:13.2f} {r['torch_empty_us']:15.2f} {r['kernel_us'] / base:13.3f}")


if __name__ == "__main__":
    main()
