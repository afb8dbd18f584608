"""tilelang-tpu: TileLang-generated PPL against hand-written PPL, side by side on the emulator.

    python benchmarks/tpu_vs_ppl.py [--runs 9] [--chip bm1690] [--show-source]

Needs the SophGo toolchain (`tilelang-tpu toolchain install`).  For copy, add,
row sum, matmul, RMSNorm, softmax and flash attention forward (upstream's bshd
example, from plugins/tilelang_tpu/tests/tpu_upstream_kernels.py, non-causal and
causal, fp16 1 x 512 x 2 x 64, 128 x 128 blocks), the TileLang kernel and its hand-written twin in
benchmarks/tpu_ppl/ (same shapes, same tiles, written for this comparison) are
built through the same tilelang-tpu runtime and launched alternately on the same
inputs; both results are checked against torch first.  Reported per kernel:
median emulator wall time of one launch (copy-in + emulated execution +
copy-out) for each, generated / hand-written, the median of the ratios of
back-to-back pairs, and the ratio of the fastest runs.  Caches go to a private
temporary directory that is removed afterwards.

The emulator exposes no cycle or instruction counters through the runtime API
the backend uses (libtpuv7_rt); its binary has a statistics mode
(CMODEL_ENABLE_STAS_GEN) that produced no output in this set-up, so wall time is
the only measure here.  Wall time on the emulator is not device time: it
includes the transfers and the emulator's own overheads on the host CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
PPL_DIR = ROOT / "tpu_ppl"
TESTS_DIR = ROOT.parent / "plugins" / "tilelang_tpu" / "tests"
#: batch, heads, sequence length, head dim of the flash attention (upstream's 128 x 128 blocks).
FLASH_ATTENTION_SHAPE = (1, 2, 512, 64)


def _kernels(T: Any) -> dict[str, Any]:
    M = N = 1024

    @T.prim_func
    def copy(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 512, M // 64, threads=1) as (bx, by):
            a = T.alloc_shared((64, 512), "float32")
            T.copy(A[by * 64, bx * 512], a)
            T.copy(a, B[by * 64, bx * 512])

    @T.prim_func
    def add(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 512, M // 64, threads=1) as (bx, by):
            a = T.alloc_shared((64, 512), "float32")
            b = T.alloc_shared((64, 512), "float32")
            c = T.alloc_fragment((64, 512), "float32")
            T.copy(A[by * 64, bx * 512], a)
            T.copy(B[by * 64, bx * 512], b)
            for i, j in T.Parallel(64, 512):
                c[i, j] = a[i, j] + b[i, j]
            T.copy(c, C[by * 64, bx * 512])

    @T.prim_func
    def row_sum(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, 1), "float32")):
        with T.Kernel(M // 64, threads=1) as bx:
            x = T.alloc_shared((64, N), "float32")
            y = T.alloc_fragment((64, 1), "float32")
            T.copy(X[bx * 64, 0], x)
            T.reduce_sum(x, y, dim=1)
            T.copy(y, Y[bx * 64, 0])

    S = 256

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

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 64, threads=1) as bx:
            x = T.alloc_shared((64, N), "float32")
            sq = T.alloc_fragment((64, N), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(X[bx * 64, 0], x)
            for i, j in T.Parallel(64, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, r, dim=1)
            for i in T.Parallel(64):
                r[i] = T.rsqrt(r[i] / N + 1e-6)
            for i, j in T.Parallel(64, N):
                sq[i, j] = x[i, j] * r[i]
            T.copy(sq, Y[bx * 64, 0])

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 64, threads=1) as bx:
            x = T.alloc_shared((64, N), "float32")
            y = T.alloc_fragment((64, N), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.copy(X[bx * 64, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(64, N):
                y[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(y, s, dim=1)
            for i, j in T.Parallel(64, N):
                y[i, j] = y[i, j] / s[i]
            T.copy(y, Y[bx * 64, 0])

    # Upstream's example_mha_fwd_bshd, as the TPU tests and examples/tpu compile it.
    sys.path.insert(0, str(TESTS_DIR))
    from tpu_upstream_kernels import flash_attention_kernel

    flash_attention = flash_attention_kernel(*FLASH_ATTENTION_SHAPE, is_causal=False)
    flash_attention_causal = flash_attention_kernel(*FLASH_ATTENTION_SHAPE, is_causal=True)
    return {"copy": copy, "add": add, "row_sum": row_sum, "matmul": matmul, "rmsnorm": rmsnorm, "softmax": softmax,
            "flash_attention": flash_attention, "flash_attention_causal": flash_attention_causal}  # fmt: skip


def _cases(torch: Any) -> dict[str, tuple[Callable[[], list[Any]], Callable[..., Any], float]]:
    """name -> (inputs, torch reference, tolerance)."""
    big = (1024, 1024)
    batch, heads, seq_len, dim = FLASH_ATTENTION_SHAPE
    bshd = (batch, seq_len, heads, dim)
    return {
        "copy": (lambda: [torch.randn(big)], lambda a: a, 0.0),
        "add": (lambda: [torch.randn(big), torch.randn(big)], lambda a, b: a + b, 0.0),
        "row_sum": (lambda: [torch.randn(big)], lambda x: x.sum(1, keepdim=True), 1e-4),
        "matmul": (lambda: [torch.randn(256, 256).half(), torch.randn(256, 256).half()], lambda a, b: a.float() @ b.float(), 1e-3),
        "rmsnorm": (lambda: [torch.randn(big)], lambda x: x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6), 1e-5),
        "softmax": (lambda: [torch.randn(big) * 3], lambda x: torch.softmax(x, 1), 1e-5),
        # fp16 in and out: the probabilities are rounded to fp16 before P @ V, as upstream does.
        "flash_attention": (lambda: [torch.randn(bshd).half() for _ in range(3)], _attention, 1e-2),
        "flash_attention_causal": (lambda: [torch.randn(bshd).half() for _ in range(3)], _causal_attention, 1e-2),
    }


def _attention(q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
    import torch.nn.functional as F

    q, k, v = (t.float().transpose(1, 2) for t in (q, k, v))
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).transpose(1, 2)


def _causal_attention(q: Any, k: Any, v: Any) -> Any:
    return _attention(q, k, v, is_causal=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="timed launches of each kernel (after one warm-up)")
    parser.add_argument("--chip", default="bm1690", choices=["bm1690", "bm1684x"])
    parser.add_argument("--show-source", action="store_true", help="print the generated PPL of each kernel")
    parser.add_argument("--kernels", nargs="*", help="run only these kernels (default: all)")
    args = parser.parse_args()

    from tilelang_tpu import setup

    from tilecore.kit.paths import private_tempdir

    # The caches move to a scratch directory; the installed toolchain must still be found.
    os.environ.setdefault(setup.TOOLCHAIN_DIR_ENV, str(setup.install_root()))
    with private_tempdir("tpu-vs-ppl-") as scratch:
        os.environ["TILELANG_CACHE_DIR"] = str(scratch / "tilelang")
        os.environ["TILECORE_CACHE_DIR"] = str(scratch / "tilecore")
        _run(args)


def _run(args: argparse.Namespace) -> None:
    import tilelang
    import tilelang.language as T
    import torch
    from tilelang_tpu import runtime, setup

    import tilecore
    from tilecore import CompiledKernel
    from tilecore._launch import Launcher

    toolchain = setup.find_toolchain()
    # One core on both sides: the hand-written twins walk the grid on one core, so the
    # generated kernels must too for a like-for-like ratio (benchmarks/tpu_multicore.py
    # measures the core split).
    tpu_target = {"kind": "tpu", "chip": args.chip, "cores": "1"}
    target = tilecore.resolve_target(tpu_target)
    rows = []
    for name, func in _kernels(T).items():
        if args.kernels and name not in args.kernels:
            continue
        make_inputs, reference, tol = _cases(torch)[name]
        generated = tilelang.compile(func, target=tpu_target, out_idx=[-1])
        if args.show_source:
            print(f"---- generated PPL: {name}\n{generated.get_kernel_source()}")
        params = generated.adapter.kernel.params  # same signature for the twin
        hand_kernel = CompiledKernel(
            name=name, source=(PPL_DIR / f"{name}.pl").read_text(), params=params, out_idx=(len(params) - 1,), target=target
        )
        hand = Launcher(hand_kernel, runtime.create_adapter(hand_kernel, toolchain))
        inputs = make_inputs()
        expected = reference(*inputs)
        for label, fn in (("generated", generated), ("hand-written", hand)):
            out = fn(*inputs)
            err = float((out.float() - expected.float()).abs().max() / expected.float().abs().max())
            if err > tol:
                raise SystemExit(f"{name} ({label}) does not match torch: relative error {err:.3g} > {tol}")
        times: dict[str, list[float]] = {"generated": [], "hand-written": []}
        pair = (("generated", generated), ("hand-written", hand))
        for run in range(args.runs):  # alternate, so drift of the host hits both alike; flip who goes first
            for label, fn in pair if run % 2 == 0 else pair[::-1]:
                start = time.perf_counter()
                fn(*inputs)
                times[label].append((time.perf_counter() - start) * 1e3)
        gen, hand = times["generated"], times["hand-written"]
        paired = statistics.median(g / h for g, h in zip(gen, hand, strict=True))
        rows.append((name, statistics.median(gen), statistics.median(hand), paired, min(gen) / min(hand)))

    # On a shared machine the load changes faster than a kernel pair runs but slower than one
    # launch: the ratio within each back-to-back pair, then its median, cancels most of it; the
    # ratio of the fastest runs (noise is mostly added delay) is a second estimate.
    print(f"\nchip {args.chip}, emulator wall time per launch (copy-in + run + copy-out), {args.runs} runs each, alternating")
    print(
        "| kernel | generated, median (ms) | hand-written PPL, median (ms) | ratio of medians | median of paired ratios | ratio of fastest runs |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, gen_ms, hand_ms, paired, fastest in rows:
        print(f"| {name} | {gen_ms:.1f} | {hand_ms:.1f} | {gen_ms / hand_ms:.2f} | {paired:.2f} | {fastest:.2f} |")


if __name__ == "__main__":
    main()
