"""``tilecore new-backend NAME [--dir PATH]``: write a new backend distribution from the template."""

from __future__ import annotations

import argparse
from pathlib import Path

from tilecore.cli import Command


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="target and backend name: a lower-case identifier, e.g. mychip")
    parser.add_argument("--dir", type=Path, default=None, help="directory to create (default: ./tilelang-NAME)")


def run(args: argparse.Namespace) -> int:
    from tilecore import template

    argv = [args.name] + (["--dir", str(args.dir)] if args.dir is not None else [])
    return template.main(argv)


COMMAND = Command(
    "new-backend",
    "write a new backend distribution tilelang-NAME from the template",
    configure,
    run,
    description="Write a complete minimal TileLang backend distribution tilelang-NAME (host-CPU C backend, entry point, "
    "hooks with the contract in comments, a conformance test).",
)
