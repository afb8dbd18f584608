"""``tilecore`` command line.

``tilecore list``          installed backends and their targets, from metadata (imports nothing)
``tilecore list --load``   the same, each backend imported in its own subprocess (state, availability, fix)
``tilecore doctor``        ``list --load`` plus each target's toolchain, environment facts for bug reports
``tilecore new-backend``   write a new backend distribution from the template
``tilecore executor``      the executor of autotuning sweeps (Ray) and a node's resources
``tilecore --version``     tilecore, plugin API, tilelang and every backend (``-vv``: entry points too)

Every failure ends in one ``tilecore: error: ...`` line on stderr and exit
status 2 (usage) or 1 (anything else); no traceback unless ``TILECORE_DEBUG=1``.

Adding a sub-command
    Write a module with ``COMMAND = Command(name, help, configure, run)``
    (``configure(parser)`` adds arguments, ``run(args) -> int`` does the work) and
    add its dotted name to :data:`SUBCOMMANDS`: one line.  Keep the module's
    top-level imports light (``--help`` imports every sub-command module);
    import heavy things inside ``run``.

Adding a ``doctor`` section
    See :mod:`tilecore.cli.doctor`: a function ``(context) -> Section`` named
    in ``DOCTOR_SECTIONS`` (one line).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

#: Sub-command modules, in ``--help`` order; each defines ``COMMAND``.  One line per sub-command.
SUBCOMMANDS: list[str] = [
    "tilecore.cli.list_cmd",
    "tilecore.cli.doctor",
    "tilecore.cli.new_backend",
    "tilecore.cli.cache_cmd",
    "tilecore.cli.executor_cmd",
]


@dataclass(frozen=True, slots=True)
class Command:
    """One sub-command: its name, one-line help, argument set-up and action."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""


class CliError(Exception):
    """A user-facing failure: printed as one ``tilecore: error: ...`` line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"tilecore: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tilecore", description="Diagnostics and tools for TileLang backends installed as tilecore plugins.")
    parser.add_argument(
        "--version",
        "-V",
        action="count",
        default=0,
        help="print versions of tilecore, its plugin API, tilelang and every backend (twice: entry points too)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in SUBCOMMANDS:
        command: Command = importlib.import_module(module_name).COMMAND
        cmd = sub.add_parser(command.name, help=command.help, description=command.description or command.help)
        command.configure(cmd)
        cmd.set_defaults(_run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.version:
            from tilecore.cli.versions import print_versions

            return print_versions(verbose=args.version > 1)
        if args.command is None:
            parser.print_help()
            return 2
        return int(args._run(args))
    except KeyboardInterrupt:
        print("tilecore: error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # the promise: one error line, never a traceback
        if os.environ.get("TILECORE_DEBUG"):
            raise
        print(f"tilecore: error: {one_line(err)}", file=sys.stderr)
        return 1


def one_line(err: BaseException) -> str:
    from tilecore.errors import TilecoreError

    text = " ".join(str(err).split())
    if isinstance(err, (TilecoreError, CliError)):
        return text
    return f"{type(err).__name__}: {text} (set TILECORE_DEBUG=1 for the traceback)"


if __name__ == "__main__":
    sys.exit(main())
