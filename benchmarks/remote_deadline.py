"""What a remote lookup costs when the store misbehaves: one total deadline, not per read.

    python benchmarks/remote_deadline.py [--deadline 1.0] [--repeat 5] [--redis-server PATH]

Side by side, each a fresh tier (first lookup of a process: connecting included; building the
tier from its configuration and opening the client, local work once per process, are not),
--repeat times:

  redis miss      a real redis-server on loopback, key absent
  redis hit       the same server, a signed 256 KiB entry (fetched, verified, installed)
  oversize        a server announcing a 200 MiB entry (refused from STRLEN, never downloaded)
  trickle         a server that sends one byte every 0.3 s, forever (read timeout 5 s)
  silent          a server that accepts and never answers (read timeout 5 s)

and then a real ``tilelang.compile`` (democpu) in a fresh interpreter: without a remote
tier, and with the trickling store.  The read timeout is set to 5 s so that only the
deadline can end the trickling and silent cases (the issue's trickle held a compile 61 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from misbehaving_server import Misbehaving  # noqa: E402

from tilecore import remote  # noqa: E402
from tilecore.remote import entry  # noqa: E402
from tilecore.remote.localserver import LocalRedisServer  # noqa: E402

VERSIONS = {"tilelang": "bench", "backend": "bench"}
KEY = "k" * 32


def lookups(url: str, key: str, repeat: int, work: Path, **options: object) -> list[float]:
    import redis  # noqa: F401 - the client library, imported once per process: not the store's cost

    seconds = []
    for index in range(repeat):
        remote.configure(url, key=KEY, **options)  # type: ignore[arg-type]
        remote.counters()  # builds the tier (URL, key, store plugins: configuration, once per process), untimed
        start = time.perf_counter()
        remote.lookup_into(str(work / f"{key[:4]}-{index}-{time.monotonic_ns()}"), key, VERSIONS)
        seconds.append(time.perf_counter() - start)
        remote.reset()
    return seconds


def compile_time(url: str | None, deadline: float, work: Path, label: str) -> float:
    """A warm-up compile without remote tier (tilelang's first-compile setup), then the measured
    cold compile of another kernel, with ``url`` as the remote tier (or none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILECORE_REMOTE_CACHE")}
    configure = {"url": url, "deadline": deadline, "timeout": 5.0} if url else {"url": None}
    plan = [
        {"configure": {"url": None}},
        {"compile": 1.0, "cache": str(work / f"{label}-warm")},
        {"configure": configure},
        {"compile": 2.0, "cache": str(work / f"{label}-measured")},
    ]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "remote_worker.py"), json.dumps(plan)],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    steps = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("STEP ")]
    assert steps[1]["ok"] and steps[3]["ok"] and steps[3]["served"] == "compiled", steps
    return float(steps[3]["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deadline", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--redis-server", default=None)
    args = parser.parse_args()
    rows: list[tuple[str, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="tc-deadline-") as name:
        work = Path(name)
        with LocalRedisServer(work / "redis", binary=args.redis_server) as server:
            import redis

            files = {"kernel_lib.bin": os.urandom(256 << 10), "params.json": b"[]"}
            from tilecore._version import __version__

            blob = entry.encode("h" * 64, {**VERSIONS, "tilecore": __version__}, files, KEY.encode())
            redis.Redis.from_url(server.url).set(f"tilecore:v1:{__version__}:" + "h" * 64, blob)
            options = {"deadline": args.deadline}
            rows.append(("redis miss", lookups(server.url, "m" * 64, args.repeat, work, **options)))
            rows.append(("redis hit (256 KiB)", lookups(server.url, "h" * 64, args.repeat, work, **options)))
        for mode in ("oversize", "trickle", "silent"):
            bad = Misbehaving(mode, size=200 << 20)
            try:
                rows.append((mode, lookups(bad.url, "x" * 64, args.repeat, work, deadline=args.deadline, timeout=5.0)))
            finally:
                bad.close()
        print(
            f"remote lookup, first of a process (connect included), {args.repeat} runs; deadline {args.deadline:g} s; load {os.getloadavg()[0]:.0f}"
        )
        print(f"{'case':<22}{'median s':>10}{'max s':>10}{'max / deadline':>16}")
        for label, seconds in rows:
            print(f"{label:<22}{statistics.median(seconds):>10.4f}{max(seconds):>10.4f}{max(seconds) / args.deadline:>16.2f}")
        trickle = Misbehaving("trickle")
        try:
            pairs = [
                (compile_time(None, args.deadline, work, f"l{n}"), compile_time(trickle.url, args.deadline, work, f"t{n}"))
                for n in range(2)
            ]
        finally:
            trickle.close()
        print("\ntilelang.compile (democpu, cold, after a warm-up compile in the same fresh interpreter), seconds")
        print(f"{'run':<6}{'no remote tier':>16}{'trickling store':>17}{'difference':>12}")
        for index, (local, slow) in enumerate(pairs):
            print(f"{index:<6}{local:>16.3f}{slow:>17.3f}{slow - local:>+12.3f}")


if __name__ == "__main__":
    main()
