"""The ``ray`` executor: an autotuning sweep as Ray tasks on a running cluster (``tilecore[ray]``).

Configs are elaborated on the driver and shipped as bytes; compile tasks run on nodes that
advertise ``tilecore:<target>:toolchain`` (``tilecore executor node-resources`` computes a
node's resources from its verified toolchains) and publish to the signed remote cache;
bench tasks need one unit of ``tilecore:<target>:bench`` (one per device or emulator host,
so benchmarks never share one) and load the artifact as a cache hit.  The best config that
passed is chosen as tilelang does (the minimum latency), its tuning record is stored, and
the driver loads the kernel as a cache hit.

Never starts a cluster: it attaches to ``address`` (``TILECORE_EXECUTOR=ray:HOST:PORT``),
else to ``RAY_ADDRESS`` / the local one (``address="auto"``).  Without the remote cache, or
when the cluster cannot be reached or has no node for the target, it warns once and tilelang
tunes locally.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import platform
import socket
import threading
import time
from typing import Any

from tilecore.executor import outcome, state
from tilecore.executor.spec import parse
from tilecore.executor.tasks import bench_task, compile_task

PREFIX = "tilecore"


def toolchain_resource(target: str) -> str:
    return f"{PREFIX}:{target}:toolchain"


def bench_resource(target: str) -> str:
    return f"{PREFIX}:{target}:bench"


def _ray() -> Any:
    """The ``ray`` module (no type information of its own: ``Any`` at this boundary)."""
    return importlib.import_module("ray")


class RayExecutor:
    """Options (keyword or ``?name=value``): ``address``; ``max_retries`` (worker crashes, default 2);
    ``device_class`` (which devices' timings a record holds; default the target)."""

    name = "ray"

    def __init__(self, spec: str = "ray", **options: Any) -> None:
        parsed = parse(spec)
        merged: dict[str, Any] = {**parsed.options, **options}
        self.spec = spec
        self.address: str = str(merged.pop("address", parsed.address) or "")
        self.max_retries = int(merged.pop("max_retries", 2))
        self.device_class: str | None = merged.pop("device_class", None)
        if merged:
            raise ValueError(f"unknown ray executor option(s): {', '.join(sorted(merged))}")
        if self.address.lower() in ("local", "local:"):
            raise ValueError("tilecore's ray executor attaches to a running cluster and never starts one: give its address, not 'local'")
        self._lock = threading.Lock()
        self.last_sweep: dict[str, Any] = {}

    # -- connection ---------------------------------------------------------------------------
    def connect(self) -> Any:
        """The ``ray`` module, attached to the configured cluster (never starts one)."""
        ray = _ray()
        with self._lock:
            if not ray.is_initialized():
                address = self.address or os.environ.get("RAY_ADDRESS") or "auto"
                _probe(address)
                ray.init(address=address, logging_level="WARNING", log_to_driver=False, configure_logging=False)
        return ray

    def nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.connect().nodes() if n.get("Alive")]

    def doctor_report(self) -> dict[str, Any]:
        report: dict[str, Any] = {"executor": "ray", "address": self.address or os.environ.get("RAY_ADDRESS") or "auto"}
        try:
            nodes = self.nodes()
        except Exception as err:
            report.update(reachable=False, error=f"{type(err).__name__}: {err}")
            return report
        report["reachable"] = True
        report["nodes"] = [
            {
                "node": n["NodeID"][:12],
                "address": n.get("NodeManagerAddress"),
                "resources": {k: v for k, v in sorted(n.get("Resources", {}).items()) if k.startswith(PREFIX) or k in ("CPU", "GPU")},
            }
            for n in nodes
        ]
        return report

    # -- a sweep ------------------------------------------------------------------------------
    def tune(self, job: Any) -> Any:
        reason = job.why_local()
        if reason is not None:
            state.logger.info("tilecore executor: tuning locally: %s", reason)
            return job.run_local()
        from tilecore import remote

        if not remote.enabled():
            state.warn_once(
                "no-remote",
                "tilecore executor 'ray' needs the remote compile cache (kernels travel through it): set "
                f"{remote.ENV}=redis://host:6379/0 and a signing key file; tuning locally.",
            )
            return job.run_local()
        start = time.perf_counter()
        candidates = job.candidates()
        identity = job.identity()
        identity["device_class"] = self.device_class or job.target
        key = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
        record = remote.get_record(key)
        if record is not None and isinstance(record.get("best"), dict):
            state.counters["record_hits"] += 1
            best = record["best"]
            self.last_sweep = {"record": key, "reused": True, "wall_s": time.perf_counter() - start}
            return job.finish(int(best["index"]), float(best["latency"]), best.get("ref_latency"))
        if not remote.healthy():  # the store failed (the tier warned once): kernels cannot travel
            state.warn_once("store-down", "tilecore executor 'ray': the remote cache store is unreachable; tuning locally.")
            return job.run_local()
        state.counters["record_misses"] += 1
        try:
            ray = self.connect()
            sweep = _Sweep(self, ray, job, candidates)
        except _NoPlace as err:
            state.warn_once(f"no-node:{job.target_name}", f"tilecore executor 'ray': {err}; tuning locally.")
            return job.run_local()
        except Exception as err:
            state.warn_once(
                "unreachable",
                f"tilecore executor 'ray': the cluster at {self.address or os.environ.get('RAY_ADDRESS') or 'auto'} cannot be "
                f"reached ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); tuning locally.",
            )
            return job.run_local()
        results = sweep.run()
        best = outcome.best(results, "ray")
        record = {
            "target": job.target,
            "device_class": identity["device_class"],
            "best": {k: best[k] for k in ("index", "config", "latency", "ref_latency")},
            "configs": [{k: r.get(k) for k in ("index", "config", "status", "latency", "host")} for r in results],
            "producers": {"tilelang": identity["tilelang"], "backend": identity["backend"], "python": platform.python_version()},
            "timing": "tilelang do_bench through the backend's tilecore_bench hook",
        }
        remote.put_record(key, record)
        state.counters["sweeps"] += 1
        self.last_sweep = {
            "record": key,
            "reused": False,
            "wall_s": time.perf_counter() - start,
            "results": results,
            "quarantined": sorted(sweep.quarantined),
        }
        return job.finish(int(best["index"]), float(best["latency"]), best.get("ref_latency"))


def _probe(address: str, timeout: float = 3.0) -> None:
    """Fail fast when ``HOST:PORT`` accepts no connection (Ray itself waits a minute or more)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    with socket.create_connection((host, int(port)), timeout=timeout):
        pass


class _NoPlace(Exception):
    """No live node advertises the resources a sweep needs."""


class _Sweep:
    """One sweep's tasks: compile everywhere the toolchain is, then benchmark where the bench slot is."""

    def __init__(self, executor: RayExecutor, ray: Any, job: Any, candidates: list[Any]) -> None:
        self.executor, self.ray, self.job, self.candidates = executor, ray, job, candidates
        self.target = job.target_name
        self.toolchain, self.bench = toolchain_resource(self.target), bench_resource(self.target)
        nodes = executor.nodes()
        self.builders = [n["NodeID"] for n in nodes if n.get("Resources", {}).get(self.toolchain)]
        if not self.builders:
            raise _NoPlace(f"no live node advertises {self.toolchain!r} (see `tilecore executor node-resources`)")
        if not any(n.get("Resources", {}).get(self.bench) for n in nodes):
            raise _NoPlace(f"no live node advertises {self.bench!r} (see `tilecore executor node-resources`)")
        self.quarantined: set[str] = set()
        self.profile = job.profile()
        self.warmup, self.rep = int(job.options["warmup"]), int(job.options["rep"])
        self.exclusive = outcome.placement(job.target).exclusive
        self.deadline = float(job.options.get("timeout") or 0)  # tilelang's per-config timeout, enforced in the bench task
        remote = ray.remote
        self._compile = remote(compile_task)
        self._bench = remote(bench_task)
        self._turn = 0

    def _compile_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": 1, "resources": {self.toolchain: 0.001}, "max_retries": self.executor.max_retries}
        options["scheduling_strategy"] = "SPREAD"  # over every builder (Ray's default packs a node first)
        if self.quarantined:  # pin to a node that has not failed with ToolchainError
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            good = [n for n in self.builders if n not in self.quarantined]
            self._turn += 1
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(good[self._turn % len(good)], soft=False)
        return options

    def _submit_compile(self, candidate: Any) -> Any:
        return self._compile.options(**self._compile_options()).remote(candidate.program)

    def _submit_bench(self, candidate: Any) -> Any:
        # An exclusive placement (the default) takes a whole slot: no other benchmark runs beside it.
        options = {"num_cpus": 1, "resources": {self.bench: 1 if self.exclusive else 0.001}, "max_retries": self.executor.max_retries}
        return self._bench.options(**options).remote(candidate.program, self.profile, self.warmup, self.rep, self.deadline)

    def run(self) -> list[dict[str, Any]]:
        results: dict[int, dict[str, Any]] = {}
        compiled_on: dict[int, str] = {}
        pending: dict[Any, tuple[str, Any]] = {self._submit_compile(c): ("compile", c) for c in self.candidates}
        while pending:
            (ready,), _ = self.ray.wait(list(pending), num_returns=1)
            kind, candidate = pending.pop(ready)
            base = {"index": candidate.index, "config": candidate.config}
            try:
                out: dict[str, Any] = self.ray.get(ready)
            except Exception as err:  # the worker died on every attempt (Ray retried it): the config is lost
                state.counters["lost"] += 1
                results[candidate.index] = {**base, "status": "lost", "error": f"{type(err).__name__}: {str(err)[:300]}"}
                continue
            state.counters[f"{kind}_tasks"] += 1
            if kind == "compile" and out["status"] == "compiled":
                compiled_on[candidate.index] = out["node"]
                pending[self._submit_bench(candidate)] = ("bench", candidate)
            elif kind == "compile" and out["status"] == "toolchain":
                self.quarantined.add(out["node"])
                state.counters["quarantined"] = len(self.quarantined)
                state.warn_once(
                    f"toolchain:{out['node']}",
                    f"tilecore executor 'ray': node {out['node'][:12]} ({out['host']}) advertises {self.toolchain!r} but "
                    f"its toolchain fails ({out.get('error', '')[:300]}); it gets no more tasks of this sweep.",
                )
                if len(self.quarantined) < len(self.builders):
                    pending[self._submit_compile(candidate)] = ("compile", candidate)
                else:
                    results[candidate.index] = {**base, **out}
            else:
                results[candidate.index] = {**base, **out, "compiled_on": compiled_on.get(candidate.index)}
        return [results[c.index] for c in self.candidates]
