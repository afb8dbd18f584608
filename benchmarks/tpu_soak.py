"""Soak test of the tpu runtime's worker processes: concurrent first starts with random kill -9.

    python benchmarks/tpu_soak.py [--procs 16] [--rounds 10] [--kill-parents 0.2] [--kill-workers 0.2]
                                  [--targets tpu,democpu] [--deadline 600] [--seed 0] [--json]

Each round starts --procs fresh interpreters at once, all sharing one fresh,
empty cache folder (tilelang's and tilecore's: every round is a first compile
and a first emulator start).  Each interpreter compiles a TileLang kernel
through ``tilelang.compile`` for each of --targets (``tpu`` and ``democpu``
by default, in a random order, shapes that do not divide the tiles), runs each on random data and
checks the result against torch and that the inputs are untouched.  A call
that loses its worker (``KernelFaultError``) is retried on the same kernel
object, which must then work.

While they run, the harness ``kill -9``s a random --kill-parents share of the
interpreters (half at a random moment within --kill-window seconds: importing,
compiling, ...; half within 2 s of their worker's appearance, while it starts
or launches) and a random --kill-workers share of the emulator
workers (at most one per interpreter, within --worker-kill-delay seconds of
its appearance: during its start or a launch).  Then it counts:

* hangs: an interpreter still running --deadline seconds after its start;
* orphans: any process of a killed interpreter's tree (recorded at the kill)
  still alive --grace seconds later, plus any emulator worker whose
  ``TILELANG_TPU_PARENT_PID`` is no longer alive;
* wrong results: any surviving interpreter without a correct result on every
  target;
* tpu worker starts: emulator worker processes that appeared (a parent killed
  before its worker started starts none);
* leftovers: the run's emulator scratch folders (``tlt-<pid>-*``) still in the
  real temp directories the interpreters use (``$TMPDIR``, ``$XDG_RUNTIME_DIR``,
  ``/tmp``; the harness does not move them) after the grace period, with no
  sweep run by the harness (the janitor of each killed interpreter must have
  removed its folder; a later interpreter's start-up sweep may also), and new
  entries in ``/tmp`` and System V shared-memory segments.

Prints one line per round and a total; --json prints the totals as JSON (the
short run in plugins/tilelang_tpu/tests/test_tpu_soak.py reads it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = textwrap.dedent(
    """
    import json, os, random, sys, time
    import torch, tilelang
    import tilelang.language as T
    from tilecore.kit.artifacts import KernelFaultError

    def add_program(M, N, bm, bn):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
                a = T.alloc_shared((bm, bn), "float32")
                b = T.alloc_fragment((bm, bn), "float32")
                T.copy(A[by * bm, bx * bn], a)
                T.copy(B[by * bm, bx * bn], b)
                for i, j in T.Parallel(bm, bn):
                    a[i, j] = a[i, j] * 2.0 + b[i, j]
                T.copy(a, C[by * bm, bx * bn])
        return main

    rng = random.Random(int(sys.argv[1]))
    targets = sys.argv[2].split(",")
    rng.shuffle(targets)
    out = {"pid": os.getpid(), "targets": {}}
    for target in targets:
        M, N = rng.choice([(65, 300), (128, 192), (200, 260)])
        kernel = tilelang.compile(add_program(M, N, 64, 128), target=target, out_idx=[-1])
        a, b = torch.randn(M, N), torch.randn(M, N)
        a0, b0 = a.clone(), b.clone()
        lost = []
        for attempt in range(3):
            try:
                c = kernel(a, b)
            except KernelFaultError as err:
                lost.append(str(err).splitlines()[0][:300])
                continue
            ok = torch.allclose(c, a0 * 2.0 + b0, rtol=1e-6, atol=1e-6) and torch.equal(a, a0) and torch.equal(b, b0)
            out["targets"][target] = {"ok": bool(ok), "attempts": attempt + 1, "lost": lost}
            break
        else:
            out["targets"][target] = {"ok": False, "attempts": 3, "lost": lost}
    print("RESULT " + json.dumps(out), flush=True)
    """
)


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        parent = _ppid(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    return children


def descendants(root: int) -> dict[int, str | None]:
    """Every live process under ``root`` (pid -> start time, to tell a reused pid apart)."""
    children = _children_map()
    found: dict[int, str | None] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found[child] = _start_time(child)
            stack.append(child)
    return found


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            items = handle.read().split(b"\0")
    except OSError:
        return {}
    return dict(item.decode(errors="replace").split("=", 1) for item in items if b"=" in item)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def run_workers(marker: str) -> list[int]:
    """Emulator workers of this run (their environment carries the run's cache folder)."""
    return [
        pid
        for pid in _all_pids()
        if "tilelang_tpu.worker" in _cmdline(pid) and _environ(pid).get("TILECORE_CACHE_DIR", "").startswith(marker)
    ]


def _alive(pid: int, started: str | None) -> bool:
    state = None
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and _start_time(pid) == started


def _shm_segments() -> set[str]:
    try:
        with open("/proc/sysvipc/shm") as handle:
            return {line.split()[1] for line in list(handle)[1:]}
    except OSError:
        return set()


@dataclass
class Round:
    started: int = 0
    parents_killed: int = 0
    workers_killed: int = 0
    hangs: int = 0
    orphans: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    correct: int = 0
    wrong: list[str] = field(default_factory=list)
    lost_then_recovered: int = 0
    workers_seen: int = 0
    pids: set[int] = field(default_factory=set)
    seconds: float = 0.0


def one_round(index: int, args: argparse.Namespace, root: Path, env: dict[str, str], rng: random.Random) -> Round:
    result = Round()
    caches = root / f"round{index}"
    run_env = {**env, "TILELANG_CACHE_DIR": str(caches / "tilelang"), "TILECORE_CACHE_DIR": str(caches / "tilecore")}
    script = root / "child.py"
    started = time.monotonic()
    children = []
    for i in range(args.procs):
        out = open(root / f"r{index}-{i}.out", "w+b")  # noqa: SIM115 - read after the child ends
        proc = subprocess.Popen([sys.executable, str(script), str(rng.randrange(1 << 30)), args.targets], stdout=out,
                                stderr=subprocess.STDOUT, env=run_env, cwd=root)  # fmt: skip
        children.append((proc, out))
    result.started = len(children)
    doomed = rng.sample([proc for proc, _ in children], k=round(args.kill_parents * len(children)))
    # Half of them at a random moment (importing, compiling, ...), half right after their worker appears
    # (the worker is then starting: the case that left spinning orphans).
    kill_parent_at = {proc.pid: started + rng.uniform(0.5, args.kill_window) for proc in doomed[: len(doomed) // 2]}
    kill_with_worker = {proc.pid for proc in doomed[len(doomed) // 2 :]}
    worker_kill_at: dict[int, float] = {}
    workers_hit: set[str] = set()
    ignored: set[int] = set()
    killed_trees: list[tuple[float, dict[int, str | None]]] = []
    killed_parents: set[int] = set()
    deadline = started + args.deadline
    while any(proc.poll() is None for proc, _ in children) and time.monotonic() < deadline:
        now = time.monotonic()
        for proc, _ in children:
            if proc.poll() is None and proc.pid in kill_parent_at and now >= kill_parent_at[proc.pid]:
                tree = descendants(proc.pid)
                proc.kill()
                killed_parents.add(proc.pid)
                killed_trees.append((now, tree))
                result.parents_killed += 1
                del kill_parent_at[proc.pid]
        kids = _children_map()
        live = [proc.pid for proc, _ in children if proc.poll() is None]
        for pid, parent in ((w, str(c)) for c in live for w in kids.get(c, []) if w not in ignored):
            if pid not in worker_kill_at and "tilelang_tpu.worker" not in (command := _cmdline(pid)):
                if "child.py" not in command:  # ppl-compile, gcc, ... (not a worker between fork and exec)
                    ignored.add(pid)
                continue
            if int(parent) in kill_with_worker:
                kill_with_worker.discard(int(parent))
                kill_parent_at[int(parent)] = now + rng.uniform(0.0, 2.0)
            # At most one worker kill per interpreter: a start is retried once, a lost launch once by the child.
            if pid not in worker_kill_at:
                chosen = parent not in workers_hit and rng.random() < args.kill_workers
                worker_kill_at[pid] = now + rng.uniform(0.0, args.worker_kill_delay) if chosen else float("inf")
                if chosen:
                    workers_hit.add(parent)
            elif now >= worker_kill_at[pid]:
                worker_kill_at[pid] = float("inf")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    result.workers_killed += 1
        time.sleep(0.2)
    for proc, _ in children:
        if proc.poll() is None:  # a hang: still running at the deadline
            result.hangs += 1
            for pid in descendants(proc.pid):
                with_suppressed_kill(pid)
            proc.kill()
        proc.wait()
    time.sleep(args.grace)
    for _when, tree in killed_trees:
        result.orphans += [f"{pid} {_cmdline(pid)[:80]}" for pid, start in tree.items() if _alive(pid, start)]
    for pid in run_workers(str(caches)):
        parent = _environ(pid).get("TILELANG_TPU_PARENT_PID", "")
        gone = parent.isdigit() and not any(p.pid == int(parent) and p.poll() is None for p, _ in children)
        if gone and not any(f"{pid} " in o for o in result.orphans):
            result.orphans.append(f"{pid} {_cmdline(pid)[:80]} (parent {parent} gone)")
    for proc, out in children:
        out.seek(0)
        text = out.read().decode(errors="replace")
        out.close()
        if proc.pid in killed_parents:
            continue
        line = next((x for x in text.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            result.wrong.append(f"pid {proc.pid} exit {proc.returncode}: {text.strip()[-600:]}")
            continue
        report = json.loads(line.removeprefix("RESULT "))
        if all(t["ok"] for t in report["targets"].values()) and len(report["targets"]) == len(args.targets.split(",")):
            result.correct += 1
            result.lost_then_recovered += sum(bool(t["lost"]) for t in report["targets"].values())
        else:
            result.wrong.append(f"pid {proc.pid}: {report}")
    result.workers_seen = len(worker_kill_at)
    result.pids = {proc.pid for proc, _ in children} | set(worker_kill_at)
    result.leftovers = scratch_dirs({proc.pid for proc, _ in children})
    result.seconds = time.monotonic() - started
    return result


def scratch_parents() -> list[Path]:
    """The temp directories an interpreter may put its emulator scratch folder in
    (:func:`tilecore.kit.paths.socket_scratch_parent`'s candidates)."""
    names = [tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR") or "", "/tmp"]
    return [Path(n) for n in dict.fromkeys(n for n in names if n) if Path(n).is_dir()]


def scratch_dirs(pids: set[int]) -> list[str]:
    """Emulator scratch folders (``tlt-<pid>-*``) of ``pids`` in the real temp directories."""
    return sorted(str(p) for parent in scratch_parents() for p in parent.glob("tlt-*") if p.name.split("-")[1] in {str(x) for x in pids})


def with_suppressed_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--targets", default="tpu,democpu", help="comma-separated targets each interpreter compiles and runs")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--kill-parents", type=float, default=0.2, help="share of interpreters killed (kill -9), rounded")
    parser.add_argument("--kill-workers", type=float, default=0.2, help="share of emulator workers killed (kill -9)")
    parser.add_argument("--kill-window", type=float, default=30.0, help="interpreters are killed within this many seconds")
    parser.add_argument("--worker-kill-delay", type=float, default=8.0, help="a chosen worker is killed within this many s")
    parser.add_argument("--deadline", type=float, default=600.0, help="an interpreter running longer has hung")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds a killed interpreter's processes get to end")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from tilelang_tpu import emulator, setup

    rng = random.Random(args.seed)
    tmp_before, shm_before = set(os.listdir("/tmp")), _shm_segments()
    root = Path(tempfile.mkdtemp(prefix="tsk-"))
    (root / "child.py").write_text(CHILD)
    # The interpreters keep this process's temp directory: their scratch folders go where a user's would.
    env = {**os.environ, setup.TOOLCHAIN_DIR_ENV: str(setup.install_root()), "PYTHONUNBUFFERED": "1"}
    env.pop(emulator.WORKDIR_ENV, None)
    rounds = []
    try:
        for index in range(args.rounds):
            r = one_round(index, args, root, env, rng)
            rounds.append(r)
            if not args.json:
                print(f"round {index + 1}/{args.rounds}: {r.started} started, {r.workers_seen} tpu worker starts, {r.parents_killed} parents and {r.workers_killed} "
                      f"workers killed, {r.hangs} hangs, {len(r.orphans)} orphans, {r.correct} correct, {len(r.wrong)} wrong, "
                      f"{r.lost_then_recovered} lost launches recovered, {len(r.leftovers)} scratch folders left, {r.seconds:.0f} s", flush=True)  # fmt: skip
                for text in r.orphans + r.wrong + r.leftovers:
                    print("   ", text[:1000])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # Entries of this run's processes only (other programs on the machine use /tmp meanwhile): the
    # emulator's per-process names and scratch folders carry the pid.
    pids = {str(pid) for r in rounds for pid in r.pids}
    new_tmp = sorted(n for n in set(os.listdir("/tmp")) - tmp_before if set(re.findall(r"\d+", n)) & pids)
    new_shm = sorted(_shm_segments() - shm_before)
    totals: dict[str, Any] = {
        "procs": args.procs,
        "rounds": args.rounds,
        "processes_started": sum(r.started for r in rounds),
        "tpu_worker_starts_seen": sum(r.workers_seen for r in rounds),
        "parents_killed": sum(r.parents_killed for r in rounds),
        "workers_killed": sum(r.workers_killed for r in rounds),
        "hangs": sum(r.hangs for r in rounds),
        "orphans": sum(len(r.orphans) for r in rounds),
        "correct": sum(r.correct for r in rounds),
        "wrong": sum(len(r.wrong) for r in rounds),
        "lost_then_recovered": sum(r.lost_then_recovered for r in rounds),
        "scratch_dirs_left": [p for r in rounds for p in r.leftovers],
        "scratch_parents": [str(p) for p in scratch_parents()],
        "new_in_tmp": new_tmp,
        "new_shm_segments": new_shm,
        "seconds": round(sum(r.seconds for r in rounds), 1),
        "details": [t for r in rounds for t in r.orphans + r.wrong][:20],
    }
    if args.json:
        print(json.dumps(totals))
    else:
        print("total: " + ", ".join(f"{k} {v}" for k, v in totals.items() if k != "details"))
    bad = totals["hangs"] or totals["orphans"] or totals["wrong"] or totals["scratch_dirs_left"] or new_tmp or new_shm
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
