"""Conformance results: the data model, the terminal table, JSON and Markdown.

``python -m tilecore.conformance.report RESULTS.json`` prints the Markdown
table of a JSON file written with ``--tilecore-json`` (how docs/conformance.md
is produced).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

#: Every status a case can have, in the order summaries list them.
STATUSES = ("passed", "failed", "error", "unsupported", "skipped")


@dataclass(frozen=True)
class CaseResult:
    """One case: ``status`` is one of :data:`STATUSES`; ``detail`` says why for anything but a pass."""

    case: str
    status: str
    detail: str = ""
    duration_s: float = 0.0


@dataclass
class Report:
    target: dict[str, Any]
    tilecore: str
    tilelang: str
    python: str
    duration_s: float
    cases: list[CaseResult] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counter = Counter(case.status for case in self.cases)
        return {status: counter[status] for status in STATUSES if counter[status]}

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cases"] = [{**asdict(c), "duration_s": round(c.duration_s, 3)} for c in self.cases]
        data["summary"] = self.counts()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        cases = [CaseResult(**c) for c in data.get("cases", [])]
        return cls(data["target"], data["tilecore"], data["tilelang"], data["python"], data["duration_s"], cases)


def _title(report: Report) -> str:
    target = report.target
    if "error" in target:
        return f"target {target['requested']!r}: {target['error']}"
    return (
        f"target {target['resolved']} ({target['distribution']} {target['version']}, device {target['device']}, "
        f"{target.get('kernel_style', 'portable')} kernels); "
        f"tilecore {report.tilecore}, tilelang {report.tilelang}, Python {report.python}"
    )


def _summary(report: Report) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in report.counts().items())
    return f"{len(report.cases)} cases: {counts or 'none'} in {report.duration_s:.1f} s"


def shorten(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters at a word boundary, with "..." when cut (the JSON keeps it whole)."""
    if len(text) <= width:
        return text
    cut = text[: width - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "..."


def render_table(report: Report, detail_width: int = 90) -> str:
    """The plain-text table printed at the end of a pytest session."""
    width = max([len("case"), *(len(c.case) for c in report.cases)])
    lines = [_title(report), f"{'case':<{width}}  {'status':<11}  {'time':>7}  detail"]
    lines.append("-" * (width + 2 + 11 + 2 + 7 + 2 + 6))
    for case in report.cases:
        detail = shorten(case.detail, detail_width)
        lines.append(f"{case.case:<{width}}  {case.status:<11}  {case.duration_s:>6.2f}s  {detail}".rstrip())
    lines.append(_summary(report))
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    """A Markdown table of ``report`` (for docs/conformance.md)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [_title(report), "", "| case | status | detail |", "| --- | --- | --- |"]
    for case in report.cases:
        lines.append(f"| `{case.case}` | {case.status} | {cell(case.detail)} |")
    lines += ["", _summary(report)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tilecore.conformance.report RESULTS.json", file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as handle:
        print(render_markdown(Report.from_dict(json.load(handle))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
