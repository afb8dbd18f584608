"""The conformance results in the docs are generated from the recorded JSON in docs/conformance/.

    # after a run with --tilecore-json=RESULTS.json: keep it, with where and when it ran
    python tests/test_docs_conformance.py record TARGET RESULTS.json --machine "what ran it"
    python tests/test_docs_conformance.py          # rewrite every generated block

docs/conformance/<target>.json is the suite's own JSON report plus a ``recorded``
object (date, machine).  Generated blocks sit between ``<!-- conformance-... -->``
markers: the summary table and one per-case table per target in docs/conformance.md,
and a one-line summary in each backend's page.  The test fails when a doc and the
recorded results disagree, so no page can claim a result that was not recorded.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path
from typing import Any

from tilecore.conformance.report import Report, render_markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "conformance"
#: Docs holding generated blocks.
DOCS = [ROOT / "docs" / "conformance.md", ROOT / "docs" / "backends" / "tpu.md", ROOT / "docs" / "backends" / "cuda.md"]
BLOCK = re.compile(r"(<!-- conformance-(summary|table|line): ?([\w-]*) -->\n)(.*?)(<!-- conformance-end -->)", re.DOTALL)


def recorded_targets() -> list[str]:
    return sorted(path.stem for path in RESULTS.glob("*.json"))


def load(target: str) -> tuple[Report, dict[str, Any]]:
    data = json.loads((RESULTS / f"{target}.json").read_text())
    return Report.from_dict(data), data["recorded"]


def result_text(report: Report) -> str:
    counts = report.counts()
    passed = counts.get("passed", 0)
    rest = ", ".join(f"{n} {status}" for status, n in counts.items() if status != "passed")
    return f"**{passed}/{len(report.cases)} passed**" + (f" ({rest})" if rest else "")


def summary_table() -> str:
    rows = ["| target | machine | date | result |", "| --- | --- | --- | --- |"]
    for target in recorded_targets():
        report, recorded = load(target)
        rows.append(
            f"| `{report.target['resolved']}` | {recorded['machine']} | {recorded['date']} | "
            f"{result_text(report)} in {report.duration_s:.1f} s ([cases](#{target})) |"
        )
    return "\n".join(rows)


def case_table(target: str) -> str:
    report, recorded = load(target)
    return f"Recorded {recorded['date']} on {recorded['machine']} ([JSON](conformance/{target}.json)).\n\n" + render_markdown(report)


def result_line(target: str) -> str:
    report, recorded = load(target)
    return (
        f"Conformance suite: {result_text(report)} for `{report.target['resolved']}` "
        f"(recorded {recorded['date']} on {recorded['machine']}; "
        f"[per case](../conformance.md#{target}), [JSON](../conformance/{target}.json))."
    )


def generate(text: str) -> str:
    def block(match: re.Match[str]) -> str:
        kind, target = match.group(2), match.group(3)
        body = {"summary": summary_table, "table": lambda: case_table(target), "line": lambda: result_line(target)}[kind]()
        return f"{match.group(1)}{body}\n{match.group(5)}"

    return BLOCK.sub(block, text)


def record(target: str, results: Path, machine: str) -> None:
    """Keep a run's JSON as docs/conformance/<target>.json with where and when it ran."""
    data = json.loads(results.read_text())
    Report.from_dict(data)  # refuse a file that is not a conformance report
    data["recorded"] = {"date": datetime.datetime.now(datetime.UTC).date().isoformat(), "machine": machine}
    (RESULTS / f"{target}.json").write_text(json.dumps(data, indent=2) + "\n")


def test_every_recorded_result_is_a_consistent_report() -> None:
    targets = recorded_targets()
    assert {"democpu", "tpu", "cuda"} <= set(targets)
    for target in targets:
        data = json.loads((RESULTS / f"{target}.json").read_text())
        report, recorded = load(target)
        assert report.target["requested"] == target and report.cases
        assert data["summary"] == report.counts(), f"{target}: summary disagrees with the cases"
        assert recorded["machine"] and datetime.date.fromisoformat(recorded["date"])


def test_docs_show_the_recorded_results() -> None:
    shown: set[str] = set()
    for doc in DOCS:
        text = doc.read_text()
        blocks = BLOCK.findall(text)
        assert blocks, f"{doc.relative_to(ROOT)} has no generated conformance block"
        shown.update(target for _, kind, target, _, _ in blocks if kind == "table")
        assert text == generate(text), f"{doc.relative_to(ROOT)} is stale: run python tests/test_docs_conformance.py"
    assert shown == set(recorded_targets()), "every recorded target has its per-case table in docs/conformance.md"


def test_the_generator_reflects_a_changed_result() -> None:
    report, _ = load("democpu")
    stale = "<!-- conformance-line: democpu -->\nConformance suite: **0/0 passed**\n<!-- conformance-end -->"
    regenerated = generate(stale)
    assert regenerated != stale and f"**{report.counts()['passed']}/{len(report.cases)} passed**" in regenerated


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    keep = sub.add_parser("record", help="keep a run's JSON under docs/conformance/")
    keep.add_argument("target")
    keep.add_argument("results", type=Path)
    keep.add_argument("--machine", required=True, help="what ran it (machine, device, load)")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.target, args.results, args.machine)
        return 0
    for doc in DOCS:
        doc.write_text(generate(doc.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
