"""``tilecore doctor``: ``list --load`` plus each target's toolchain and the environment.

Each backend is imported and its ``tilecore_setup`` run in its own subprocess under a
deadline (:mod:`tilecore.cli.isolate`), so a backend that hangs or crashes is named,
not fatal.  A target whose default options cannot be chosen here (e.g. a default that
detects absent hardware) is checked with the explicit target its backend suggests
(hook ``tilecore_doctor_target``), and the exact ``tilecore doctor --target ...``
command is printed.  Exit status 1 when a backend failed or a toolchain check failed.

Adding a section
    A section is a function ``(context: DoctorContext) -> Section``; add its
    ``"module:function"`` to :data:`DOCTOR_SECTIONS` (one line).  It runs in the
    doctor process after the backends are checked, must not raise (an exception
    becomes a failed section naming it) and should import what it needs inside.
    Its ``data`` appears under ``sections`` in ``--json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from tilecore._version import docs_url
from tilecore.cli import Command

#: Extra report sections, as ``"module:function"``; one line per section.
DOCTOR_SECTIONS: list[str] = [
    "tilecore.cli.tilelang_check:doctor_section",
    "tilecore.cli.requirements:doctor_section",
    "tilecore.cli.cache_cmd:doctor_section",
    "tilecore.cli.executor_cmd:doctor_section",
]


@dataclass(frozen=True, slots=True)
class DoctorContext:
    """What a section may read: the parsed arguments and the report built so far."""

    args: argparse.Namespace
    report: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Section:
    """One titled block of the doctor report; ``ok=False`` makes doctor exit 1."""

    title: str
    ok: bool
    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def as_json(self, name: str) -> dict[str, Any]:
        return {"name": name, "title": self.title, "ok": self.ok, "lines": list(self.lines), "data": dict(self.data)}


def run_sections(context: DoctorContext) -> list[dict[str, Any]]:
    results = []
    for name in DOCTOR_SECTIONS:
        try:
            module, _, function = name.partition(":")
            section = getattr(importlib.import_module(module), function)(context)
            if not isinstance(section, Section):
                raise TypeError(f"returned {type(section).__name__}, expected tilecore.cli.doctor.Section")
        except Exception as err:
            section = Section(name, False, [f"the section failed: {type(err).__name__}: {err}"])
        results.append(section.as_json(name))
    return results


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help=f"machine-readable output (schema: {docs_url('user-guide.md#json-output-schema_version-2')})"
    )
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="TARGET",
        help="run setup for TARGET as written in user code (e.g. an explicit arch); repeatable",
    )
    parser.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS", help="per-backend deadline (default 60, or TILECORE_DOCTOR_TIMEOUT)"
    )


def run(args: argparse.Namespace) -> int:
    from tilecore._registry import Registry
    from tilecore.cli import envinfo, isolate, render, report

    timeout = args.timeout if args.timeout is not None else isolate.timeout_from_env()
    data = report.loaded_report(Registry(), doctor=True, targets=list(args.target), timeout=timeout)
    data["environment"] = envinfo.collect()
    data["sections"] = run_sections(DoctorContext(args, data))
    if args.json:
        json.dump(data, sys.stdout, indent=2, default=str)
        print()
    else:
        render.render(data)
    summary = data["summary"]
    failed = summary["failed"] or summary["toolchain_errors"] or not all(s["ok"] for s in data["sections"])
    return 1 if failed else 0


COMMAND = Command("doctor", "check every backend in isolation: state, toolchains, devices, environment", configure, run)
