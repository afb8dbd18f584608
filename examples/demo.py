"""The main demo: one unmodified TileLang kernel on every available tilecore target.

    python examples/demo.py [TARGET ...]

Without arguments it runs on each installed target that reports itself
available (`tilecore list`), except GPU targets without a GPU.  The kernel is
plain TileLang; nothing here imports tilecore or a backend.
"""

from __future__ import annotations

import sys
import time

import tilelang
import tilelang.language as T

M, N, BLOCK = 256, 192, 64


@T.prim_func
def scaled_add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
    with T.Kernel(T.ceildiv(M, BLOCK), T.ceildiv(N, BLOCK), threads=128) as (bx, by):
        a = T.alloc_fragment((BLOCK, BLOCK), "float32")
        b = T.alloc_fragment((BLOCK, BLOCK), "float32")
        T.copy(A[bx * BLOCK, by * BLOCK], a)
        T.copy(B[bx * BLOCK, by * BLOCK], b)
        for i, j in T.Parallel(BLOCK, BLOCK):
            a[i, j] = a[i, j] * 2.0 + b[i, j]
        T.copy(a, C[bx * BLOCK, by * BLOCK])


def available_targets() -> list[str]:
    import tilecore  # only to list targets for the demo; kernels do not need it
    from tilecore._registry import probe

    registry = tilecore.get_registry()
    registry.load_all()
    return [spec.name for _, spec in registry.declared_targets() if probe(spec) and spec.upstream is None]


def run(target: str) -> None:
    start = time.perf_counter()
    kernel = tilelang.compile(scaled_add, target=target, out_idx=[-1])
    compiled = time.perf_counter() - start
    profiler = kernel.get_profiler()
    x, y = profiler._get_inputs()
    out = kernel(x, y)
    error = (out.cpu() - (x.cpu() * 2 + y.cpu())).abs().max().item()
    ms = profiler.do_bench(n_warmup=1, n_repeat=3)
    print(f"{target:10s} compile {compiled:6.2f} s | max |error| vs torch {error:.2e} | {ms:8.3f} ms/call | device {x.device}")
    if error > 1e-5:
        raise SystemExit(f"{target}: result differs from torch")


def main() -> None:
    targets = sys.argv[1:] or available_targets()
    if not targets:
        raise SystemExit("no available tilecore target; run `tilecore list` to see why")
    for target in targets:
        run(target)


if __name__ == "__main__":
    main()
