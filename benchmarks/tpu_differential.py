"""Differential run of random TileLang programs on tilelang's ``c`` target and on ``tpu``
(BM1690 emulator), each compared with torch; prints the classification table.

    .venv/bin/python benchmarks/tpu_differential.py --count 200 --seed 1
    nice -n 10 .venv/bin/python benchmarks/tpu_differential.py --count 10000 --seed 1 --jsonl runs.jsonl
    .venv/bin/python benchmarks/tpu_differential.py --count 1000 --seed 7 --minutes 9 --summary shard7.json

A program is reproduced by (seed, count, index): the same hypothesis version draws the same
programs for the same seed and count, and the index is also the seed of its input data.
``--summary`` writes the run as JSON: outcome pairs, refusals, crashes, every WRONG program
(index, source, outcomes), two programs of each kind of crash (index, seed, source) and the
construct coverage of the programs drawn
(``differential.coverage``), so shards of one long run can be merged.

Programs are drawn by hypothesis (seeded: the same seed and count give the same programs);
each runs on both targets; outcomes are match / refused (the construct the error names) /
WRONG / crash.  A disagreement -- one target matches torch, the other gives a different
result -- is a bug; every WRONG program is shrunk to its smallest form and printed as
TileLang source.  Exit status 1 when any program was WRONG on either target.
The generator lives in plugins/tilelang_tpu/tests/differential/ (shared with the seeded
corpus test, tests/test_tpu_differential.py).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "tilelang_tpu" / "tests"))

from differential.coverage import features
from differential.program import Program, source
from differential.runner import TARGETS, Outcome, normalise, run_on
from differential.shrink import shrink
from differential.strategies import programs
from hypothesis import HealthCheck, Phase, given, seed, settings


class _OutOfTime(Exception):
    """Raised by the visitor once ``--minutes`` have passed: ends hypothesis's generation."""


def _draw(count: int, seed_value: int, visit: object) -> None:
    """Call ``visit(program)`` for ``count`` programs drawn with ``seed_value`` (fewer when
    ``visit`` raises :class:`_OutOfTime`)."""

    @seed(seed_value)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(programs())
    def each(prog: Program) -> None:
        visit(prog)  # type: ignore[operator]

    with contextlib.suppress(_OutOfTime):
        each()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100, help="programs to draw (default 100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jsonl", type=Path, help="append one line per program (source and outcomes) here")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink WRONG programs")
    parser.add_argument("--quiet", action="store_true", help="no line per program")
    parser.add_argument("--minutes", type=float, default=0.0, help="stop running programs after this long (0: no limit)")
    parser.add_argument("--summary", type=Path, help="write the run (table, WRONG programs, coverage) here as JSON")
    args = parser.parse_args()
    logging.disable(logging.INFO)

    pairs: collections.Counter[tuple[str, str]] = collections.Counter()
    refusals = {t: collections.Counter[str]() for t in TARGETS}
    crashes = {t: collections.Counter[str]() for t in TARGETS}
    #: tpu's refusals and crashes of programs that c runs correctly: the generality gap (issue 18)
    gap: collections.Counter[str] = collections.Counter()
    gap_examples: dict[str, list[str]] = collections.defaultdict(list)
    #: "target: crash" -> up to 2 programs (index and source) that gave it, whatever the other target did
    crash_examples: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    wrong: list[tuple[Program, dict[str, Outcome]]] = []
    wrong_at: list[int] = []
    #: feature -> [programs drawn with it, tpu matched, both matched]
    coverage: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    started = time.monotonic()
    done = 0
    last_written = time.monotonic()

    def write_summary(path: Path) -> None:
        """The run so far as JSON, replaced atomically: written every 30 s during the run too, so a
        shard killed at its deadline still leaves its programs behind."""
        minutes = (time.monotonic() - started) / 60

        summary = {
            "seed": args.seed,
            "count": args.count,
            "run": done,
            "minutes": round(minutes, 3),
            "programs_per_minute": round(done / max(minutes, 1e-9), 2),
            "pairs": {f"{c}/{t}": n for (c, t), n in sorted(pairs.items())},
            "refused": {t: dict(refusals[t].most_common()) for t in TARGETS},
            "crash": {t: dict(crashes[t].most_common()) for t in TARGETS},
            "c_match_tpu_not": dict(gap.most_common()),
            "c_match_tpu_not_examples": {k: gap_examples[k] for k, _ in gap.most_common()},
            "crash_examples": dict(crash_examples),
            "wrong": [
                {"index": i, "source": source(p), **{t: [o.status, o.detail] for t, o in oc.items()}}
                for i, (p, oc) in zip(wrong_at, wrong, strict=True)
            ],
            "coverage": {k: v for k, v in sorted(coverage.items())},
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=1))
        tmp.replace(path)

    def visit(prog: Program) -> None:
        nonlocal done, last_written
        if args.minutes and time.monotonic() - started > args.minutes * 60:
            raise _OutOfTime
        try:
            outcomes = {t: run_on(prog, t, seed=done) for t in TARGETS}
        except Exception as err:  # a harness bug must not end a long run: counted as a crash
            outcomes = {t: Outcome("crash", f"harness: {type(err).__name__}: {err}"[:200]) for t in TARGETS}
        index = done
        done += 1
        pairs[(outcomes["c"].status, outcomes["tpu"].status)] += 1
        for feature in features(prog):
            row = coverage[feature]
            row[0] += 1
            row[1] += outcomes["tpu"].status == "match"
            row[2] += outcomes["tpu"].status == outcomes["c"].status == "match"
        for t, o in outcomes.items():
            if o.status == "refused":
                refusals[t][normalise(o.detail)] += 1
            elif o.status == "crash":
                crashes[t][normalise(o.detail)] += 1
                kept = crash_examples[f"{t}: {normalise(o.detail)}"]
                if len(kept) < 2:  # so a crash can be reproduced from the summary, not only counted
                    kept.append({"index": index, "seed": args.seed, "source": source(prog)})
        if outcomes["c"].status == "match" and outcomes["tpu"].status in ("refused", "crash"):
            construct = f"{outcomes['tpu'].status}: {normalise(outcomes['tpu'].detail)}"
            gap[construct] += 1
            if len(gap_examples[construct]) < 2:
                gap_examples[construct].append(source(prog))
        if any(o.status == "WRONG" for o in outcomes.values()):
            wrong.append((prog, outcomes))
            wrong_at.append(index)
        if args.jsonl:
            line = {"n": index, "source": source(prog), **{t: [o.status, o.detail] for t, o in outcomes.items()}}
            with args.jsonl.open("a") as fh:
                fh.write(json.dumps(line) + "\n")
        if args.summary and time.monotonic() - last_written > 30:
            write_summary(args.summary)
            last_written = time.monotonic()
        if not args.quiet:
            rate = done / max(time.monotonic() - started, 1e-9) * 60
            print(f"[{done}/{args.count}] c={outcomes['c'].status} tpu={outcomes['tpu'].status} ({rate:.1f}/min)", flush=True)

    _draw(args.count, args.seed, visit)
    minutes = (time.monotonic() - started) / 60
    print(
        f"\n{done} programs run of {args.count} drawn, seed {args.seed}, {minutes:.1f} min ({done / max(minutes, 1e-9):.1f} programs/min), pid {os.getpid()}"
    )
    print("\n| c \\ tpu | " + " | ".join(("match", "refused", "WRONG", "crash", "invalid")) + " |")
    print("|---|---|---|---|---|---|")
    for c in ("match", "refused", "WRONG", "crash", "invalid"):
        print(f"| **{c}** | " + " | ".join(str(pairs[(c, t)]) for t in ("match", "refused", "WRONG", "crash", "invalid")) + " |")
    for t in TARGETS:
        total = collections.Counter(
            {
                s: sum(n for (c, tt), n in pairs.items() if (c if t == "c" else tt) == s)
                for s in ("match", "refused", "WRONG", "crash", "invalid")
            }
        )
        print(f"\n{t}: " + ", ".join(f"{k} {v}" for k, v in total.items()))
        for name, counter in (("refused", refusals[t]), ("crash", crashes[t])):
            for construct, n in counter.most_common(12):
                print(f"  {name} {n:5d}  {construct}")
    print(f"\ndisagreements (one target matches, the other WRONG): {pairs[('match', 'WRONG')] + pairs[('WRONG', 'match')]}")
    if args.summary:
        write_summary(args.summary)
    for prog, outcomes in wrong:
        bad = [t for t, o in outcomes.items() if o.status == "WRONG"]
        print("\n=== WRONG on " + ", ".join(f"{t}: {outcomes[t].detail}" for t in bad))
        small = prog
        if not args.no_shrink:
            small = shrink(prog, lambda p, bad=bad: all(run_on(p, t).status == "WRONG" for t in bad))
        print(source(small))
        for t in TARGETS:
            o = run_on(small, t)
            print(f"# {t}: {o.status}: {o.detail}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
