"""Merge the ``--summary`` files of a sharded differential run (``benchmarks/tpu_differential.py``)
into one summary and print its table.

    python benchmarks/tpu_differential_merge.py shard*.json --out merged.json
    python benchmarks/tpu_differential_merge.py call1/merged.json call2/merged.json   # merged runs merge too

Each shard ran its own seed, so the merged run is reproduced shard by shard with
(hypothesis version, seed, count, index); the merged file keeps every shard's seed, count and
programs run, every WRONG program with the seed that drew it, and two programs of each kind of
crash (seed, index, source).  Exit status 1 when any
program was WRONG on tpu (a disagreement or a wrong result beside a refusal), 0 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

STATUSES = ("match", "refused", "WRONG", "crash", "invalid")


def merge(paths: list[Path]) -> dict[str, object]:
    """One summary of the shards at ``paths`` (counters added, lists concatenated)."""
    pairs: collections.Counter[str] = collections.Counter()
    refused: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    crash: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    coverage: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    gap: collections.Counter[str] = collections.Counter()
    gap_examples: dict[str, list[str]] = collections.defaultdict(list)
    crash_examples: dict[str, list[object]] = collections.defaultdict(list)
    shards: list[dict[str, int | float]] = []
    wrong: list[dict[str, object]] = []
    for path in paths:
        shard = json.loads(path.read_text())
        # A merged file lists its shards (and its WRONG programs carry their seeds already).
        shards.extend(shard.get("shards") or [{k: shard[k] for k in ("seed", "count", "run", "minutes", "programs_per_minute")}])
        pairs.update(shard["pairs"])
        for target, counts in shard["refused"].items():
            refused[target].update(counts)
        for target, counts in shard["crash"].items():
            crash[target].update(counts)
        gap.update(shard.get("c_match_tpu_not", {}))
        for construct, sources in shard.get("c_match_tpu_not_examples", {}).items():
            gap_examples[construct] = (gap_examples[construct] + sources)[:2]
        for kind, programs in shard.get("crash_examples", {}).items():  # each with its seed and index
            crash_examples[kind] = (crash_examples[kind] + programs)[:2]
        for feature, row in shard["coverage"].items():
            coverage[feature] = [a + b for a, b in zip(coverage[feature], row, strict=True)]
        wrong.extend(w if "seed" in w else {"seed": shard["seed"], **w} for w in shard["wrong"])
    return {
        "shards": shards,
        "run": sum(s["run"] for s in shards),
        "pairs": dict(sorted(pairs.items())),
        "refused": {t: dict(c.most_common()) for t, c in sorted(refused.items())},
        "crash": {t: dict(c.most_common()) for t, c in sorted(crash.items())},
        "c_match_tpu_not": dict(gap.most_common()),
        "c_match_tpu_not_examples": {k: gap_examples[k] for k, _ in gap.most_common()},
        "crash_examples": dict(sorted(crash_examples.items())),
        "wrong": wrong,
        "coverage": dict(sorted(coverage.items())),
    }


def report(merged: dict[str, object]) -> str:
    """The merged run as Markdown: programs, the c x tpu table, tpu's refusals and crashes."""
    pairs: dict[str, int] = merged["pairs"]  # type: ignore[assignment]
    shards: list[dict[str, float]] = merged["shards"]  # type: ignore[assignment]
    lines = [
        f"{merged['run']} programs in {len(shards)} shards "
        f"(seeds {min(int(s['seed']) for s in shards)}-{max(int(s['seed']) for s in shards)}), "
        f"{sum(s['programs_per_minute'] for s in shards):.0f} programs/min together",
        "",
        "| c \\ tpu | " + " | ".join(STATUSES) + " |",
        "|---|" + "---|" * len(STATUSES),
    ]
    for c in STATUSES:
        lines.append(f"| **{c}** | " + " | ".join(str(pairs.get(f"{c}/{t}", 0)) for t in STATUSES) + " |")
    tpu_wrong = sum(n for key, n in pairs.items() if key.endswith("/WRONG"))
    # A disagreement is a bug in whichever target is WRONG: tpu's is ours, c's is the referee's
    # (docs/benchmarks/tpu-differential.md lists the c bugs found).
    lines += [
        "",
        f"tpu WRONG: {tpu_wrong}; disagreements (one target matches, the other WRONG): "
        f"{pairs.get('match/WRONG', 0)} tpu WRONG where c matches, {pairs.get('WRONG/match', 0)} c WRONG where tpu matches",
    ]
    for kind in ("refused", "crash"):
        counts: dict[str, int] = merged[kind].get("tpu", {})  # type: ignore[attr-defined]
        for construct, n in list(counts.items())[:12]:
            lines.append(f"  tpu {kind} {n:6d}  {construct}")
    gap: dict[str, int] = merged["c_match_tpu_not"]  # type: ignore[assignment]
    lines.append(f"c matches, tpu refuses or crashes: {sum(gap.values())}")
    for construct, n in list(gap.items())[:15]:
        lines.append(f"  {n:6d}  {construct}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shards", type=Path, nargs="+", help="--summary files of the shards")
    parser.add_argument("--out", type=Path, help="write the merged summary here as JSON")
    args = parser.parse_args()
    merged = merge(args.shards)
    print(report(merged))
    if args.out:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(merged, indent=1))
        tmp.replace(args.out)
    pairs: dict[str, int] = merged["pairs"]  # type: ignore[assignment]
    return 1 if any(key.endswith("/WRONG") and n for key, n in pairs.items()) else 0


if __name__ == "__main__":
    sys.exit(main())
