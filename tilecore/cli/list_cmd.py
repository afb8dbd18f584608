"""``tilecore list``: installed backends and their targets.

Without ``--load`` only distribution metadata is read (nothing is imported: fast, and a
broken or hanging backend cannot affect it).  With ``--load`` each backend is imported
in its own subprocess under a deadline (:mod:`tilecore.cli.isolate`) and its state,
targets, availability, error and fix are shown.
"""

from __future__ import annotations

import argparse
import json
import sys

from tilecore.cli import Command


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--load", action="store_true", help="import each backend (in its own subprocess) and show state, availability, errors"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output (schema: docs/user-guide.md, 'JSON output')")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="per-backend load deadline with --load (default 60, or TILECORE_DOCTOR_TIMEOUT)",
    )


def run(args: argparse.Namespace) -> int:
    from tilecore._registry import Registry
    from tilecore.cli import isolate, render, report

    registry = Registry()
    if args.load:
        timeout = args.timeout if args.timeout is not None else isolate.timeout_from_env()
        data = report.loaded_report(registry, doctor=False, targets=[], timeout=timeout)
    else:
        data = report.metadata_report(registry)
    if args.json:
        json.dump(data, sys.stdout, indent=2, default=str)
        print()
    else:
        render.render(data)
    return 0


COMMAND = Command("list", "installed backends and their targets (metadata; --load imports each in isolation)", configure, run)
