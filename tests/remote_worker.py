"""Test worker for the remote cache: one "machine" running a JSON plan of steps.

``python remote_worker.py '<plan>'`` where the plan is a list of steps:

* ``{"configure": {"url": ..., "key": ..., **options}}`` (``url`` null: no remote tier)
* ``{"compile": scale, "cache": dir, "target": "democpu"}``: compile the element-wise kernel
  below for ``scale`` with the local tilelang cache in ``dir``, run it on random data,
  compare with torch and check the inputs are untouched
* ``{"flush": true}``: wait for background publications
* ``{"fork": n, "scale": s, "cache_root": dir}``: fork ``n`` children that start together
  and each compile ``scale`` with their own local cache ``dir/<i>``

Each step prints one ``STEP <json>`` line; the run ends with ``COUNTERS <json>``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time


def scaled_add(M: int, N: int, scale: float, block: int = 32):
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), threads=128) as (bx, by):
            a = T.alloc_fragment((block, block), "float32")
            b = T.alloc_fragment((block, block), "float32")
            T.copy(A[bx * block, by * block], a)
            T.copy(B[bx * block, by * block], b)
            for i, j in T.Parallel(block, block):
                a[i, j] = a[i, j] * scale + b[i, j]
            T.copy(a, C[bx * block, by * block])

    return main


def scaled_copy(M: int, N: int, scale: float, BM: int = 32, BN: int = 64):  # the one-shared-buffer form device backends take
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=1) as (bx, by):
            a = T.alloc_shared((BM, BN), "float32")
            T.copy(A[by * BM, bx * BN], a)
            for i, j in T.Parallel(BM, BN):
                a[i, j] = a[i, j] * scale
            T.copy(a, C[by * BM, bx * BN])

    return main


def compile_and_check(scale: float, cache: str, target: str = "democpu") -> dict:
    import tilelang
    import torch

    os.environ["TILELANG_CACHE_DIR"] = cache
    M, N = 70, 90  # neither divides the 32x32 tile
    start = time.perf_counter()
    factory = scaled_copy if target == "tpu" else scaled_add
    kernel = tilelang.compile(factory(M, N, scale), target=target, out_idx=[-1])
    seconds = time.perf_counter() - start
    x, y = torch.randn(M, N), torch.randn(M, N)
    x0, y0 = x.clone(), y.clone()
    out = kernel(x) if factory is scaled_copy else kernel(x, y)
    expected = x0 * scale if factory is scaled_copy else x0 * scale + y0
    ok = bool(torch.allclose(out, expected, atol=1e-5, rtol=1e-5) and torch.equal(x, x0) and torch.equal(y, y0))
    served = "disk" if getattr(kernel.adapter, "kernel", None) is not None and kernel.adapter.kernel.library_path else "compiled"
    return {"scale": scale, "ok": ok, "served": served, "seconds": seconds}


def main() -> None:
    plan = json.loads(sys.argv[1])
    import tilelang  # noqa: F401 - activates tilecore through its autoload hook

    from tilecore import remote

    for step in plan:
        if "configure" in step:
            options = dict(step["configure"])
            remote.configure(options.pop("url"), key=options.pop("key", None), **options)
            result: dict = {"configured": True}
        elif "compile" in step:
            result = compile_and_check(step["compile"], step["cache"], step.get("target", "democpu"))
        elif "flush" in step:
            result = {"flushed": remote.flush(30)}
        elif "fork" in step:
            result = fork_compile(step["fork"], step["scale"], step["cache_root"])
        else:
            raise SystemExit(f"unknown step {step}")
        result["counters"] = remote.counters()
        print("STEP", json.dumps(result), flush=True)
    print("COUNTERS", json.dumps(remote.counters()), flush=True)


def fork_compile(n: int, scale: float, cache_root: str) -> dict:
    from tilecore import remote

    os.makedirs(cache_root, exist_ok=True)
    read_end, write_end = os.pipe()
    children = []
    for index in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            os.read(read_end, 1)  # start line: every child is forked before any compiles
            code = 1
            try:
                result = compile_and_check(scale, os.path.join(cache_root, str(index)))
                remote.flush(30)
                result["counters"] = remote.counters()
                # A file per child, not a line on the shared stdout: eight concurrent writers of
                # multi-kilobyte lines (and anything tilelang prints) could interleave there.
                report = os.path.join(cache_root, f"child-{index}.json")
                with open(report + ".tmp", "w") as handle:
                    json.dump(result, handle)
                os.replace(report + ".tmp", report)
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    os.write(write_end, b"x" * n)
    codes = [os.waitpid(pid, 0)[1] for pid in children]
    reports = []
    for index in range(n):
        with contextlib.suppress(FileNotFoundError), open(os.path.join(cache_root, f"child-{index}.json")) as handle:
            reports.append(json.load(handle))
    return {"exit_codes": codes, "children": reports}


if __name__ == "__main__":
    main()
