"""The ``local`` executor: a sweep on this machine.

Without options it is tilelang's own sweep in this process (today's behaviour, the default).
With ``processes=N`` (``TILECORE_EXECUTOR=local?processes=N`` or
``configure("local", processes=N)``) the sweep runs in a pool of N worker processes, for crash
isolation: configs compile N at a time, then benchmark one at a time (a benchmark never
shares the machine with another task, as in tilelang's sweep; N at a time when the target's
:class:`tilecore.Placement` is not exclusive); a worker that dies (a TVM
segfault, an emulator abort) has its task retried on a fresh worker, ``max_retries`` times
(default 2), then the config is recorded ``lost`` and the sweep goes on; a benchmark running
past tilelang's per-config ``timeout`` has its worker killed and the config recorded ``lost``.
Kernels travel through tilelang's disk cache (every worker and this process share
``TILELANG_CACHE_DIR``), so the best kernel is loaded here as a cache hit.
"""

from __future__ import annotations

import time
from typing import Any

from tilecore.executor import state
from tilecore.executor.outcome import best, placement
from tilecore.executor.pool import ProcessPool, Task
from tilecore.executor.spec import parse


class LocalExecutor:
    name = "local"

    def __init__(self, spec: str = "local", **options: Any) -> None:
        parsed = parse(spec)
        merged: dict[str, Any] = {**parsed.options, **options}
        self.spec = spec
        self.processes = int(merged.pop("processes", 0) or 0)
        self.max_retries = int(merged.pop("max_retries", 2))
        if merged or parsed.address:
            unknown = sorted(merged) + ([f"address {parsed.address!r}"] if parsed.address else [])
            raise ValueError(f"unknown local executor option(s): {', '.join(unknown)} (known: processes, max_retries)")
        if self.processes < 0:
            raise ValueError(f"local executor: processes={self.processes}; give a number of worker processes >= 1")
        self._pool: ProcessPool | None = None
        self.last_sweep: dict[str, Any] = {}

    def tune(self, job: Any) -> Any:
        if not self.processes:
            return job.run_local()
        reason = job.why_local()
        if reason is not None:
            state.logger.info("tilecore executor: tuning in this process: %s", reason)
            return job.run_local()
        if self._pool is None:
            self._pool = ProcessPool(self.processes, self.max_retries)
        start = time.perf_counter()
        candidates = job.candidates()
        compiled = self._pool.run([Task(c.index, "compile", (c.program,)) for c in candidates], width=self.processes)
        state.counters["compile_tasks"] += len(compiled)
        profile, warmup, rep = job.profile(), int(job.options["warmup"]), int(job.options["rep"])
        deadline = float(job.options.get("timeout") or 0)
        benches = [
            Task(c.index, "bench", (c.program, profile, warmup, rep), deadline_s=deadline)
            for c in candidates
            if compiled[c.index]["status"] == "compiled"
        ]
        exclusive = placement(job.target).exclusive  # the default: one benchmark at a time on this machine
        measured = self._pool.run(benches, width=1 if exclusive else self.processes)
        state.counters["bench_tasks"] += len(measured)
        results = [{"index": c.index, "config": c.config, **measured.get(c.index, compiled[c.index])} for c in candidates]
        state.counters["lost"] += sum(r["status"] == "lost" for r in results)
        self.last_sweep = {"reused": False, "wall_s": time.perf_counter() - start, "results": results}
        chosen = best(results, "local")
        state.counters["sweeps"] += 1
        return job.finish(int(chosen["index"]), float(chosen["latency"]), chosen.get("ref_latency"))

    def close(self) -> None:
        """End this executor's worker processes (they also end with this process)."""
        if self._pool is not None:
            self._pool.close()

    def doctor_report(self) -> dict[str, Any]:
        if self.processes:
            return {"executor": "local", "detail": f"a pool of {self.processes} worker processes on this machine (crash isolation)"}
        return {"executor": "local", "detail": "tilelang's autotuner in this process"}
