"""The Ray executor of autotuning sweeps, on a real loopback Ray cluster and a real Redis.

One session cluster (``ray.cluster_utils.Cluster``: a head with no CPUs and two one-CPU worker
nodes, loopback only, no dashboard, a private temp dir removed at the end).  Every node has its
own tilelang and tilecore caches, as separate machines would, the signing key from its own key
file, the toolchain resources of democpu and tpu, and node A the only bench slot of each.
Unchanged ``@tilelang.autotune`` code (tests/tune_kernels.py) tunes through it; a fresh process
with empty caches then gets the best kernel from the tuning record as a cache hit, compiling
nothing.  Skipped with the reason when Ray is not installed.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Ray reads these when it is imported: loopback stays loopback (else 127.0.0.1 is rewritten to the
#: host's routable address), and no usage report.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
for _name, _value in LOOPBACK_ENV.items():
    os.environ.setdefault(_name, _value)

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'tilecore[ray]'; make setup does)")

from tune_kernels import check_tuned, make_matmul  # noqa: E402

import tilecore  # noqa: E402
from tilecore import executor, remote  # noqa: E402
from tilecore.executor.ray_executor import bench_resource, toolchain_resource  # noqa: E402
from tilecore.remote.localserver import LocalRedisServer, free_port  # noqa: E402

TESTS = Path(__file__).resolve().parent
KEY = "executor-test-signing-key-0123456789abcdef"
TARGETS = ("democpu", "tpu")


def _tpu_toolchain_dir() -> str:
    """Where the SophGo toolchain is, found before the per-test cache isolation moves tilecore's cache."""
    try:
        from tilelang_tpu.setup import install_root
    except ImportError:
        return ""
    return str(install_root())


TOOLCHAIN_DIR = _tpu_toolchain_dir()


def _ray_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in out if ("raylet" in line or "gcs_server" in line or "ray::" in line) and "ps -eo" not in line]


@pytest.fixture(scope="session")
def cluster(redis_server: LocalRedisServer) -> Iterator[dict[str, Any]]:
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    if ray_constants.ENABLE_RAY_CLUSTER:
        pytest.skip("Ray was imported before this module set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: it would leave loopback")

    before = set(_ray_processes())
    root = Path(tempfile.mkdtemp(prefix="tcray-"))  # short: Ray's socket paths must stay under 108 bytes
    key_file = root / "cache.key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in LOOPBACK_ENV.items():
            mp.setenv(name, value)

        def node_env(name: str) -> dict[str, str]:
            (root / name / "tmp").mkdir(parents=True)
            return {
                "TILELANG_CACHE_DIR": str(root / name / "tilelang"),
                "TILECORE_CACHE_DIR": str(root / name / "tilecore"),
                "TILELANG_TPU_TOOLCHAIN_DIR": TOOLCHAIN_DIR,
                "TMPDIR": str(root / name / "tmp"),
                "TILECORE_REMOTE_CACHE": redis_server.url,
                "TILECORE_REMOTE_CACHE_KEY_FILE": str(key_file),  # each node reads its own key file
                "PYTHONPATH": str(TESTS),  # ref_prog's module, as a user installs it on the nodes
                **LOOPBACK_ENV,
            }

        (root / "ray").mkdir()
        mp.setenv("RAY_TMPDIR", str(root))  # <root>/ray: Ray's address file and sessions: private, removed below
        common = {"node_ip_address": "127.0.0.1", "include_dashboard": False, "temp_dir": str(root / "ray")}
        made: Any = None
        try:
            start = time.perf_counter()
            made = Cluster(initialize_head=True, head_node_args={**common, "num_cpus": 0})
            tools = {toolchain_resource(t): 1.0 for t in TARGETS}
            benches = {bench_resource(t): 1.0 for t in TARGETS}
            a = made.add_node(**common, num_cpus=1, resources={**tools, **benches}, env_vars=node_env("a"))
            made.add_node(**common, num_cpus=1, resources=tools, env_vars=node_env("b"))
            ray.init(address=made.address, logging_level="WARNING", log_to_driver=False, configure_logging=False)
            yield {"cluster": made, "root": root, "node_env": node_env, "common": common, "a": a, "started_s": time.perf_counter() - start}
        finally:
            ray.shutdown()
            if made is not None:
                made.shutdown()
            shutil.rmtree(root, ignore_errors=True)
    deadline = time.monotonic() + 15
    while set(_ray_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(_ray_processes()) - before, f"Ray processes survived the cluster: {set(_ray_processes()) - before}"


@pytest.fixture
def tuned(cluster: dict[str, Any], redis_server: LocalRedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The driver: remote cache on (the key given in code), the ``ray`` executor configured."""
    monkeypatch.setenv("TILELANG_TPU_TOOLCHAIN_DIR", TOOLCHAIN_DIR)
    tilecore.activate()
    remote.configure(redis_server.url, key=KEY)
    try:
        yield executor.configure("ray")
    finally:
        executor.reset()
        remote.reset()


CHILD = """
import json, logging, sys
sys.path.insert(0, {tests!r})
import tilecore
from tilecore import executor, remote
tilecore.activate()
remote.configure({url!r}, key={key!r})
from tune_kernels import make_matmul
import torch
report = {{}}
a, b = torch.randn(64, 64), torch.randn(64, 64)
for target, rep in {sweeps!r}:
    kernel = make_matmul(target, rep=rep)(64, 64, 64)
    remote.flush()
    ok = bool(torch.allclose(kernel(a, b), a @ b, atol=1e-3, rtol=1e-3))
    report[f"{{target}}-{{rep}}"] = {{"config": kernel.config, "ok": ok, "executor": executor.counters(), "remote": remote.counters()}}
print("REPORT", json.dumps(report))
"""


def _child(tmp_path: Path, env: dict[str, str], **fields: Any) -> dict[str, Any]:
    """A fresh process with empty caches running ``sweeps`` ((target, rep) pairs) of tune_kernels."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(TESTS), **fields))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TILECORE_REMOTE", "RAY_ADDRESS"))}
    clean.update(env, TILELANG_TPU_TOOLCHAIN_DIR=TOOLCHAIN_DIR)
    clean.update(TILELANG_CACHE_DIR=str(tmp_path / "child-tilelang"), TILECORE_CACHE_DIR=str(tmp_path / "child-tilecore"))
    done = subprocess.run([sys.executable, str(script)], env=clean, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("REPORT"))[7:])
    report["stderr"] = done.stderr
    return report


def _compiles(counted: dict[str, int]) -> int:
    """Compiles a process ran, as its remote tier saw them: every compile offers its entry for publication."""
    return sum(counted.get(k, 0) for k in ("published", "publish_exists", "publish_skipped", "publish_unverified", "publish_too_big"))


def test_unchanged_autotune_sweeps_on_the_cluster_then_a_fresh_process_compiles_nothing(
    tuned: Any, redis_server: LocalRedisServer, tmp_path: Path
) -> None:
    chosen = {}
    for target in TARGETS:
        hits = remote.counters().get("hits", 0)
        kernel = make_matmul(target)(64, 64, 64)
        sweep = tuned.last_sweep
        assert not sweep["reused"]
        results = sweep["results"]
        assert len(results) == 4 and all(r["status"] == "ok" for r in results), results
        check_tuned(kernel, results)
        assert remote.counters()["hits"] == hits + 1  # the driver loaded the best kernel from the cache
        chosen[target] = kernel.config
    assert executor.counters()["sweeps"] == 2 and executor.counters()["bench_tasks"] == 8

    # A fresh process, empty caches, a cluster address where nothing listens: the records name the
    # kernels, the cache has them, and the cluster is never needed.  Then a sweep with no record
    # (rep=2) needs the cluster: one warning, and tilelang tunes locally.
    port = free_port()
    sweeps = [(t, 3) for t in TARGETS] + [("democpu", 2)]
    child = _child(tmp_path, {"TILECORE_EXECUTOR": f"ray:127.0.0.1:{port}"}, url=redis_server.url, key=KEY, sweeps=sweeps)
    democpu, tpu, unreachable = child["democpu-3"], child["tpu-3"], child["democpu-2"]
    assert democpu["ok"] and democpu["config"] == chosen["democpu"] and tpu["ok"] and tpu["config"] == chosen["tpu"]
    assert tpu["executor"] == {"record_hits": 2}
    assert tpu["remote"]["hits"] == 2 and tpu["remote"].get("misses", 0) == 0 and _compiles(tpu["remote"]) == 0, tpu["remote"]
    assert unreachable["ok"] and unreachable["executor"] == {"record_hits": 2, "record_misses": 1}
    # tilelang's local sweep: its four kernels are the first sweep's (same TIR), one already local here.
    assert unreachable["remote"]["hits"] == 2 + 3 and _compiles(unreachable["remote"]) == 0, unreachable["remote"]
    assert child["stderr"].count("cannot be reached") == 1, child["stderr"][-3000:]


def test_a_crashing_or_hung_config_is_retried_then_lost_and_the_sweep_goes_on(tuned: Any) -> None:
    # Real kernels: config 1 calls raise(SIGSEGV), config 2 pause() (it never returns): no part of tilelang is faked.
    configs = [
        {"BM": 16, "BN": 16, "BK": 16},
        {"BM": 32, "BN": 32, "BK": 16, "fault": "segv"},
        {"BM": 32, "BN": 16, "BK": 32, "fault": "hang"},
        {"BM": 16, "BN": 32, "BK": 32},
    ]
    faulty = executor.configure("ray", max_retries=1)
    kernel = make_matmul("democpu", rep=4, configs=configs, timeout=10)(64, 64, 64)
    results = faulty.last_sweep["results"]
    assert [r["status"] for r in results] == ["ok", "lost", "lost", "ok"], results
    assert all("died" in r["error"] or "WorkerCrashedError" in r["error"] for r in results[1:3]), results
    assert executor.counters()["lost"] == 2
    check_tuned(kernel, results)


def test_doctor_shows_the_executor_and_every_node_with_its_resources(tuned: Any) -> None:
    from tilecore.cli.executor_cmd import doctor_lines

    report = executor.doctor_report()
    assert report["executor"] == "ray" and report["reachable"] is True
    resources = [node["resources"] for node in report["nodes"]]
    assert len(resources) == 3  # the head and two nodes
    assert sum(toolchain_resource("tpu") in r for r in resources) == 2
    assert sum(bench_resource("tpu") in r for r in resources) == 1
    assert any(f"{bench_resource('democpu')}=1" in line for line in doctor_lines(report))


def test_the_cluster_listens_on_loopback_only(cluster: dict[str, Any]) -> None:
    import psutil  # a dependency of tilelang

    ours = [p for p in psutil.process_iter(["cmdline"]) if str(cluster["root"]) in " ".join(p.info["cmdline"] or [])]
    assert ours, "no process of the test cluster found"
    listening = {
        (conn.laddr.ip, conn.laddr.port)
        for process in ours
        for conn in process.net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
    }

    def loopback(ip: str) -> bool:
        address = ipaddress.ip_address(ip)
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
        return bool((mapped or address).is_loopback)

    assert listening and all(loopback(ip) for ip, _ in listening), listening


def test_a_node_whose_toolchain_fails_is_quarantined_and_its_configs_compile_elsewhere(tuned: Any, cluster: dict[str, Any]) -> None:
    made = cluster["cluster"]
    # Advertises democpu's toolchain, but its C++ compiler does not exist: every compile there is a ToolchainError.
    env = {**cluster["node_env"]("c"), "CXX": "/nonexistent/c++"}
    bad = made.add_node(**cluster["common"], num_cpus=1, resources={toolchain_resource("democpu"): 1.0}, env_vars=env)
    try:
        # Tiles no other test compiles: every config needs a compiler (a cache hit needs none).
        fresh = [
            {"BM": 64, "BN": 16, "BK": 16},
            {"BM": 16, "BN": 64, "BK": 16},
            {"BM": 64, "BN": 64, "BK": 64},
            {"BM": 16, "BN": 16, "BK": 64},
        ]
        kernel = make_matmul("democpu", configs=fresh)(64, 64, 64)
        sweep = tuned.last_sweep
        assert sweep["quarantined"] == [bad.node_id]
        assert all(r["status"] == "ok" and r["compiled_on"] != bad.node_id for r in sweep["results"]), sweep["results"]
        check_tuned(kernel, sweep["results"])
    finally:
        made.remove_node(bad)


def test_a_node_lost_mid_sweep_has_its_tasks_rerun_elsewhere_without_recompiling(tuned: Any, cluster: dict[str, Any]) -> None:
    import psutil  # a dependency of tilelang
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    made, root = cluster["cluster"], cluster["root"]
    doomed = made.add_node(
        **cluster["common"],
        num_cpus=1,
        resources={toolchain_resource("democpu"): 1.0, bench_resource("democpu"): 1.0},
        env_vars=cluster["node_env"]("x"),
    )
    # Node A's democpu bench slot is held until the doomed node is gone, so the sweep's first
    # benchmark runs there; the doomed node is killed (every process, no goodbye) while it runs.
    released = root / "x-gone"

    def hold(marker: str) -> None:
        while not os.path.exists(marker):
            time.sleep(0.05)

    holder = (
        ray.remote(hold)
        .options(
            num_cpus=0,
            resources={bench_resource("democpu"): 1},
            scheduling_strategy=NodeAffinitySchedulingStrategy(cluster["a"].node_id, soft=False),
        )
        .remote(str(released))
    )
    killed: list[int] = []

    def kill_when_it_benchmarks() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            for process in psutil.process_iter(["cmdline"]):
                try:
                    if "bench_task" in " ".join(process.info["cmdline"] or []) and str(root / "x") in process.environ().get(
                        "TILECORE_CACHE_DIR", ""
                    ):
                        killed.append(process.pid)
                        made.remove_node(doomed, allow_graceful=False)
                        break
                except psutil.Error:
                    continue
            time.sleep(0.02)
        released.touch()

    killer = threading.Thread(target=kill_when_it_benchmarks, daemon=True)
    killer.start()
    try:
        fresh = [  # tiles no other test compiles
            {"BM": 64, "BN": 32, "BK": 32},
            {"BM": 32, "BN": 64, "BK": 32},
            {"BM": 64, "BN": 16, "BK": 32},
            {"BM": 16, "BN": 64, "BK": 32},
        ]
        kernel = make_matmul("democpu", configs=fresh, rep=200)(64, 64, 64)
    finally:
        released.touch()
        killer.join(timeout=30)
        ray.get(holder, timeout=60)
        if not killed:
            made.remove_node(doomed)
    sweep = tuned.last_sweep
    assert killed, "the doomed node never ran a benchmark"
    results = sweep["results"]
    # Every config passed although the node died running one of them: that benchmark was rerun on a
    # live node (a config whose every attempt died would be "lost").  Node A benchmarks only after the death.
    assert all(r["status"] == "ok" for r in results), results
    assert any(r["node"] == cluster["a"].node_id for r in results), results
    assert not any(r["compiled"] for r in results), results  # the rerun loaded the published kernel: no compile
    assert executor.counters()["compile_tasks"] == 4 and executor.counters()["bench_tasks"] == 4  # one result each
    check_tuned(kernel, results)
