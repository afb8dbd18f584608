"""Autotuning sweep: tilelang's own tuner vs the process pool vs the Ray executor on a loopback cluster.

    python benchmarks/tune_cluster.py [--targets democpu,tpu] [--configs 8] [--nodes 2] [--noop 200] [--processes 2]

Starts (and stops) a throwaway ``redis-server`` and a loopback Ray cluster (``ray.cluster_utils``:
a head with no CPUs and ``--nodes`` one-CPU nodes, each with its own caches; node 0 holds the bench
slot), then per target, in one process, back to back:

  local      tilelang's autotuner (the ``local`` executor) on an empty local cache
  pool       ``local?processes=N``: the sweep in N worker processes of this machine (crash isolation)
  ray        the same unchanged ``@tilelang.autotune`` sweep through ``TILECORE_EXECUTOR=ray``
  record     the sweep again with empty local caches: the tuning record and one remote hit

and the executor's own per-task cost: the round trip of ``--noop`` empty Ray tasks (warm workers)
and the bytes of one shipped candidate.  Every chosen kernel is checked against torch.  The
cluster runs on the machine's cores, so ``ray`` vs ``local`` shows the overlap of compiling and
benchmarking on N one-CPU nodes, not N machines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback stays loopback (read at `import ray`)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def configs(n: int) -> list[dict[str, int]]:
    shapes = [(bm, bn, bk) for bm in (16, 32) for bn in (16, 32) for bk in (16, 32)]
    return [{"BM": bm, "BN": bn, "BK": bk} for bm, bn, bk in (shapes * 2)[:n]]


def fresh_caches(root: Path, name: str) -> None:
    os.environ["TILELANG_CACHE_DIR"] = str(root / name / "tilelang")
    os.environ["TILECORE_CACHE_DIR"] = str(root / name / "tilecore")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="democpu,tpu")
    parser.add_argument("--configs", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--noop", type=int, default=200)
    parser.add_argument("--processes", type=int, default=2, help="worker processes of the 'pool' mode (local?processes=N)")
    args = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from tilecore.executor.ray_executor import bench_resource, toolchain_resource
    from tilecore.remote.localserver import LocalRedisServer

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    root = Path(tempfile.mkdtemp(prefix="tcbench-"))
    os.environ["RAY_TMPDIR"] = str(root)
    os.environ["TMPDIR"] = str(root / "tmp")
    (root / "tmp").mkdir()
    try:
        from tilelang_tpu.setup import install_root

        os.environ.setdefault("TILELANG_TPU_TOOLCHAIN_DIR", str(install_root()))
    except ImportError:
        pass
    os.chdir(root)  # tilelang's local tuner writes autotuner.log into the working directory
    key = os.urandom(32).hex()
    (root / "key").write_text(key)
    (root / "key").chmod(0o600)
    cluster: Any = None
    try:
        with LocalRedisServer(root / "redis") as redis:
            t0 = time.perf_counter()
            common = {"node_ip_address": "127.0.0.1", "include_dashboard": False, "temp_dir": str(root / "ray")}
            cluster = Cluster(initialize_head=True, head_node_args={**common, "num_cpus": 0})
            for i in range(args.nodes):
                resources = {toolchain_resource(t): 1.0 for t in targets}
                if i == 0:
                    resources.update({bench_resource(t): 1.0 for t in targets})
                env = {
                    "TILELANG_CACHE_DIR": str(root / f"node{i}" / "tilelang"),
                    "TILECORE_CACHE_DIR": str(root / f"node{i}" / "tilecore"),
                    "TILECORE_REMOTE_CACHE": redis.url,
                    "TILECORE_REMOTE_CACHE_KEY_FILE": str(root / "key"),
                    "PYTHONPATH": str(ROOT / "tests"),
                    "TILELANG_TPU_TOOLCHAIN_DIR": os.environ.get("TILELANG_TPU_TOOLCHAIN_DIR", ""),
                }
                cluster.add_node(**common, num_cpus=1, resources=resources, env_vars=env)
            ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False, configure_logging=False)
            started = time.perf_counter() - t0

            import torch
            import tune_kernels

            import tilecore
            from tilecore import executor, remote

            tilecore.activate()
            rows = []
            for target in targets:
                sweep = configs(args.configs)
                timings: dict[str, float] = {}
                chosen: dict[str, Any] = {}
                for mode in ("local", "pool", "ray", "record"):
                    fresh_caches(root, f"{target}-{mode}")
                    remote.configure(redis.url, key=key) if mode in ("ray", "record") else remote.configure(None)
                    spec = {"local": ("local", {}), "pool": ("local", {"processes": args.processes})}.get(mode, ("ray", {}))
                    used = executor.configure(spec[0], **spec[1])
                    start = time.perf_counter()
                    kernel = tune_kernels.make_matmul(target, rep=5, configs=sweep)(64, 64, 64)
                    timings[mode] = time.perf_counter() - start
                    a, b = torch.randn(64, 64), torch.randn(64, 64)
                    torch.testing.assert_close(kernel(a, b), a @ b, atol=1e-3, rtol=1e-3)
                    chosen[mode] = kernel.config
                    if mode == "ray":
                        results = used.last_sweep["results"]
                        bench_s = [r["seconds"] for r in results if "seconds" in r]
                        lost = sum(r["status"] != "ok" for r in results)
                    if mode == "record":
                        assert used.last_sweep["reused"], "the second executor sweep did not reuse the record"
                rows.append((target, len(sweep), timings, chosen, statistics.median(bench_s), lost))
                executor.reset()

            # Ray's own cost per task (warm workers) and per candidate.
            noop = ray.remote(num_cpus=1)(lambda: None)
            ray.get([noop.remote() for _ in range(4)])
            trips = []
            for _ in range(args.noop):
                s = time.perf_counter()
                ray.get(noop.remote())
                trips.append(time.perf_counter() - s)
            trips.sort()

            print(f"cluster: head + {args.nodes} one-CPU nodes on loopback, started in {started:.1f} s; load {os.getloadavg()[0]:.1f}")
            print(
                f"{'target':8} {'configs':>7} {'local s':>8} {'pool s':>7} {'ray s':>7} {'local/ray':>9} {'record s':>9} {'local/record':>12}  "
                "chosen (local | pool | ray)"
            )
            for target, n, t, chosen, bench_median, lost in rows:
                print(
                    f"{target:8} {n:7d} {t['local']:8.1f} {t['pool']:7.1f} {t['ray']:7.1f} {t['local'] / t['ray']:8.2f}x {t['record']:9.2f} "
                    f"{t['local'] / t['record']:11.0f}x  {chosen['local']} | {chosen['pool']} | {chosen['ray']}  "
                    f"(ray bench task median {bench_median:.2f} s, lost {lost})"
                )
            print(
                f"per task (Ray, warm workers, {args.noop} no-op round trips): median {trips[len(trips) // 2] * 1e3:.2f} ms, "
                f"p90 {trips[int(len(trips) * 0.9)] * 1e3:.2f} ms"
            )
    finally:
        os.chdir(ROOT)
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
