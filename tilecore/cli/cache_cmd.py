"""``tilecore cache stats|clear|prune`` (both tiers) and the remote section of ``tilecore doctor``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``"512M"`` -> bytes (K, M, G, T are powers of 1024; a trailing B or iB is allowed)."""
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = raw[-1:] if raw[-1:] in _UNITS else ""
    try:
        value = float(raw[: len(raw) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write e.g. 500M or 2G") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a size cannot be negative")
    return int(value * _UNITS[unit])


def human(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def local_dir() -> Path:
    """Where tilelang keeps this environment's kernel entries (asked of the bridge)."""
    from tilecore._bridge import local_cache_dir

    return Path(local_cache_dir())


def doctor_lines(report: dict[str, Any]) -> list[str]:
    if not report.get("configured"):
        return [f"remote cache: off ({report.get('hint', '')})"]
    lines = [f"remote cache: {report['url']}"]
    if "signing" in report:
        lines.append(f"  signing: {report['signing']}")
    if report.get("reachable"):
        lines.append(f"  reachable: yes, round trip {report['rtt_ms']:.2f} ms; {report.get('server', {}).get('server', '')}")
        lines.append(
            f"  entries for this tilecore version: {report['entries']} ({human(report['bytes'])}); "
            f"other versions: {report['other_versions_entries']} ({human(report['other_versions_bytes'])})"
        )
    else:
        lines.append(f"  reachable: NO ({report.get('error', 'unknown error')})")
    return lines


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``tilecore cache``."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    commands = {
        "stats": "entries and bytes per tier",
        "clear": "delete every entry (remote: this tilecore version's, unless --all-versions)",
        "prune": "delete stale entries: local ones unused for --max-age days or above --max-bytes; "
        "remote ones of other tilecore versions, and least recently used ones above --max-bytes",
    }
    for name, text in commands.items():
        cmd = sub.add_parser(name, help=text, description=text)
        tiers = cmd.add_mutually_exclusive_group()
        tiers.add_argument("--local", action="store_true", help="only the local tier")
        tiers.add_argument("--remote", action="store_true", help="only the remote tier")
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "clear":
            cmd.add_argument("--all-versions", action="store_true", help="remote: also other tilecore versions' entries")
        if name == "prune":
            cmd.add_argument("--max-age", type=float, metavar="DAYS", help="local: remove entries unused for DAYS")
            cmd.add_argument(
                "--max-bytes", type=parse_size, metavar="SIZE", help="trim each tier to SIZE (e.g. 2G), least recently used first"
            )


def run(args: argparse.Namespace) -> int:
    """``tilecore cache stats|clear|prune``: both tiers unless --local or --remote."""
    from tilecore import remote
    from tilecore.remote import local

    do_local, do_remote = not args.remote, not args.local
    result: dict[str, Any] = {}
    status = 0
    if do_local:
        root = local_dir()
        if args.action == "stats":
            result["local"] = local.usage(root)
        elif args.action == "clear":
            result["local"] = {"dir": str(root), "removed": local.clear(root)}
        else:
            age = args.max_age * 86400 if args.max_age is not None else None
            result["local"] = {"dir": str(root), **local.prune(root, age, args.max_bytes)}
    if do_remote:
        try:
            if not remote.enabled():
                result["remote"] = {"configured": False, "hint": f"set {remote.ENV} to use a remote cache"}
            elif args.action == "stats":
                result["remote"] = remote.stats()
            elif args.action == "clear":
                result["remote"] = {"removed": remote.clear(args.all_versions)}
            else:
                result["remote"] = remote.prune(args.max_bytes)
        except Exception as err:
            result["remote"] = {"error": f"{type(err).__name__}: {err}"}
            status = 1
    if args.json:
        json.dump(result, sys.stdout, indent=2, default=str)
        print()
        return status
    for tier, data in result.items():
        print(f"{tier}:")
        for name, value in data.items():
            shown = human(value) if "bytes" in name and isinstance(value, int) else value
            print(f"  {name}: {shown}")
    return status


def doctor_section(context: Any) -> Any:
    """The remote-cache section of ``tilecore doctor`` (fails only when a configured store is unreachable)."""
    from tilecore import remote
    from tilecore.cli.doctor import Section

    report = remote.doctor_report()
    ok = not report.get("configured") or bool(report.get("reachable"))
    return Section("remote cache", ok, doctor_lines(report), report)


def _command() -> Any:
    from tilecore.cli import Command

    return Command("cache", "stats, clear, prune of the local and remote kernel caches", configure, run)


COMMAND = _command()
