"""tilelang-hip's event-timing loop next to Triton's ``do_bench``, in one run on one GPU.

    python benchmarks/hip_event_timing_check.py [--sizes 1024 2048 4096 8192]

``tilecore.kit.timing.event_bench`` (what tilelang-hip times with) times through ``torch.cuda.Event``,
which a ROCm build of torch implements with HIP events and a CUDA build with
CUDA events.  With no AMD GPU at hand, this script checks the loop (budgets,
cache flush, event pairs) on whatever GPU torch drives: it times fp16 matrix
products with ``event_bench`` and with ``triton.testing.do_bench`` (same
flush-then-time method, when Triton is installed) and prints both and their
ratio.  It needs torch, tilecore and tilelang-hip, not tilelang.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from tilecore.kit.timing import event_bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no GPU visible to torch")
    device = torch.device("cuda", torch.cuda.current_device())
    build = f"torch {torch.__version__} (hip={torch.version.hip}, cuda={torch.version.cuda})"
    print(f"device: {torch.cuda.get_device_name(device)}; {build}")
    try:
        from triton.testing import do_bench as triton_bench
    except ImportError:
        triton_bench = None
    rows = []
    print(f"{'n':>6} {'event_bench ms':>15} {'triton ms':>10} {'ratio':>7} {'TFLOP/s':>8}")
    for n in args.sizes:
        a = torch.randn(n, n, device=device, dtype=torch.float16)
        b = torch.randn(n, n, device=device, dtype=torch.float16)
        ours = statistics.fmean(event_bench(lambda a=a, b=b: a @ b, device, flush_bytes=256 << 20, warmup=25.0, rep=100.0))
        theirs = float(triton_bench(lambda a=a, b=b: a @ b, warmup=25, rep=100)) if triton_bench else float("nan")
        tflops = 2 * n**3 / (ours * 1e-3) / 1e12
        rows.append({"n": n, "event_bench_ms": ours, "triton_ms": theirs, "ratio": ours / theirs, "tflops": tflops})
        print(f"{n:>6} {ours:>15.4f} {theirs:>10.4f} {ours / theirs:>7.3f} {tflops:>8.1f}")
    print("JSON", json.dumps({"device": torch.cuda.get_device_name(device), "torch": build, "rows": rows}))


if __name__ == "__main__":
    main()
