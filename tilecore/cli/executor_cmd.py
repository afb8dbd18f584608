"""``tilecore executor``: the executor of autotuning sweeps, and what a cluster node advertises.

``tilecore executor``                  the executor in force and, for a cluster, its nodes
``tilecore executor node-resources``   the ``--resources`` JSON for ``ray start`` on this node,
                                       from the toolchains whose set-up succeeds here
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("show", "node-resources"), default="show")
    parser.add_argument("--target", action="append", default=None, metavar="TARGET", help="node-resources: only these targets")
    parser.add_argument("--json", action="store_true", help="show: machine-readable output")


def run(args: argparse.Namespace) -> int:
    from tilecore import executor

    if args.action == "node-resources":
        print(json.dumps(executor.node_resources(args.target), sort_keys=True))
        return 0
    report = executor.doctor_report()
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=str)
        print()
    else:
        print("\n".join(doctor_lines(report)))
    return 0 if "error" not in report and report.get("reachable", True) else 1


def doctor_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"executor: {report.get('executor')}" + (f" ({report['detail']})" if report.get("detail") else "")]
    if "address" in report:
        lines.append(f"cluster: {report['address']} " + ("reachable" if report.get("reachable") else "NOT reachable"))
    if report.get("error"):
        lines.append(f"error: {report['error']}")
    for node in report.get("nodes", []):
        resources = ", ".join(f"{k}={v:g}" for k, v in node["resources"].items()) or "no tilecore resources"
        lines.append(f"node {node['node']} at {node['address']}: {resources}")
    return lines


def doctor_section(context: Any) -> Any:
    """The executor section of ``tilecore doctor`` (fails only when a configured cluster is unreachable)."""
    from tilecore import executor
    from tilecore.cli.doctor import Section

    report = executor.doctor_report()
    ok = "error" not in report and report.get("reachable", True) is not False
    return Section("executor", ok, doctor_lines(report), report)


def _command() -> Any:
    from tilecore.cli import Command

    return Command("executor", "the executor of autotuning sweeps (Ray), and a node's resources", configure, run)


COMMAND = _command()
