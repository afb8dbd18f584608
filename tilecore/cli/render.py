"""Human output of a report: one line per backend, details indented under it, wrapped to the terminal."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Callable
from typing import Any

_MARK = {"loaded": "ok", "not loaded": "--", "failed": "FAILED", "blocked": "blocked"}


def width() -> int:
    """The terminal's width (60-140 columns); no wrapping when output goes to a pipe or file,
    so ``grep`` sees whole lines."""
    if not sys.stdout.isatty():
        return 10_000
    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 140))


class Writer:
    """Collects wrapped lines; ``item(text, level)`` indents continuation lines under the first."""

    def __init__(self, emit: Callable[[str], None] = print) -> None:
        self.emit = emit
        self.columns = width()

    def line(self, text: str = "", level: int = 0, hang: int = 2) -> None:
        indent = "  " * level
        if not text:
            self.emit("")
            return
        for out in textwrap.wrap(text, self.columns, initial_indent=indent, subsequent_indent=indent + " " * hang, break_on_hyphens=False):
            self.emit(out)

    def field(self, label: str, text: str, level: int) -> None:
        self.line(f"{label}: {text}", level, hang=len(label) + 2)


def render(report: dict[str, Any], emit: Callable[[str], None] = print) -> None:
    out = Writer(emit)
    head = f"tilecore {report['tilecore']} (plugin API {report['plugin_api']}), tilelang {report['tilelang'] or 'not installed'}"
    out.line(head + f", autoload {'on' if report['autoload'] else 'off'}")
    activation = report.get("activation")
    if activation is not None and not activation["ok"]:
        out.field("not active", activation["error"] or "unknown error", 1)
    if report.get("environment"):
        render_environment(out, report["environment"])
    for section in report.get("sections", []):
        out.line()
        out.line(f"{section['title']}: {'ok' if section['ok'] else 'PROBLEM'}")
        for text in section["lines"]:
            out.line(text, 1)
    out.line()
    if not report["backends"]:
        out.line("no backends installed (entry-point group 'tilecore.backends'); e.g. pip install tilelang-<vendor>")
    for backend in report["backends"]:
        render_backend(out, backend, loaded=report["loaded"])
    out.line()
    out.line(summary_line(report))


def render_backend(out: Writer, b: dict[str, Any], *, loaded: bool) -> None:
    mark = _MARK.get(b["state"], b["state"])
    names = ", ".join(t["name"] for t in b["targets"]) if b["targets"] else ", ".join(b["metadata_targets"])
    role = " [wrapper]" if b["role"] == "wrapper" else ""
    api = f" API {b['api_version']}" if b["api_version"] else ""
    out.line(f"{mark:<7} {b['name']:<12} {b['distribution']} {b['version']}{api}{role}  targets: {names or '-'}", hang=8)
    if b["duplicates"]:
        out.field(
            "duplicate", f"the identical entry point {b['name']} = {b['entry_point']} is also registered by {', '.join(b['duplicates'])}", 4
        )
    if not b["metadata_complete"] and not loaded:
        out.line("metadata lists no targets (legacy): naming an unlisted target imports this backend", 4)
    if b["reason"]:
        out.field("reason", b["reason"], 4)
    if b["error"]:
        kind = f"{b['error_type']}: " if b["error_type"] and b["error_type"] not in ("Timeout", "Crash", "ChildError") else ""
        out.field("error", kind + _without_own_fix(b["error"], b["fix"] if b["state"] == "failed" else None), 4)
    if b["fix"] and b["state"] == "failed":
        out.field("fix", b["fix"], 4)
    for t in b["targets"]:
        aliases = f" (aliases: {', '.join(t['aliases'])})" if t["aliases"] else ""
        out.line(f"{t['name']}{aliases}: {t['description']}", 4)
        tc = t["toolchain"]
        failed_fix = tc["fix"] if tc is not None and not tc["ok"] else None
        out.field("available" if t["available"] else "unavailable", _without_fix(str(t["reason"]), failed_fix), 5)
        if t["default_options"] is not None:
            opts = ", ".join(f"{k}={v}" for k, v in t["default_options"].items()) or "none"
            out.field("defaults", f"{opts}; device {t['device']}; priority {t['priority']}", 5)
        else:
            out.field("defaults", f"none ({t['default_options_error']})", 5)
        if t["upstream"]:
            out.line(f"lowering, codegen, adapter: tilelang's built-in {t['upstream']!r} backend", 5)
        if tc is not None:
            if not tc["ok"] and tc["error"] == t["default_options_error"]:
                out.field("toolchain", "not checked: no default options (above)", 5)
                out.field("fix", tc["fix"] or "", 6)
            else:
                render_toolchain(out, tc, str(t["reason"]))


def _without_own_fix(error: str, fix: str | None) -> str:
    """A failed backend's error without the " Fix: X" its TilecoreError appended, when the ``fix:`` line
    printed under it (the error's fix, then "; or block it ...") starts with X: the fix is said once."""
    head, sep, own = error.rpartition(" Fix: ")
    return head if sep and fix and " ".join(fix.split()).startswith(own) else error


def _without_fix(text: str, fix: str | None) -> str:
    """``text`` without the " Fix: ..." a TilecoreError appends, when that fix is printed on its own line."""
    return " ".join(text.split()).replace(f" Fix: {' '.join(fix.split())}", "") if fix else text


def render_toolchain(out: Writer, tc: dict[str, Any], reason: str = "") -> None:
    checked = f" (checked with {tc['checked_with']})" if tc["checked_with"] else ""
    if not tc["ok"]:
        error = _without_fix(str(tc["error"]), tc["fix"])
        if error and error in _without_fix(reason, tc["fix"]):  # the probe already said it, one line up
            error = "the reason above"
        status = "not on this machine" if tc.get("not_on_this_machine") else "ERROR"
        out.field("toolchain", f"{status}{checked}: {error}", 5)
        if tc["fix"]:
            out.field("fix", tc["fix"], 6)
        return
    if tc["name"] is None:
        out.field("toolchain", f"ok{checked}", 5)
    else:
        out.field("toolchain", f"{tc['name']} {tc['version']} at {tc['location']} (found by {tc['found_by']}){checked}", 5)
    for note in tc["notes"]:
        out.line(note, 6)
    if tc["command"]:
        out.field("to check a specific target", tc["command"], 6)


def render_environment(out: Writer, env: dict[str, Any]) -> None:
    out.line()
    out.line("environment (paste into bug reports):")
    for key, value in env.items():
        if isinstance(value, dict):
            text = ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
        elif isinstance(value, list):
            text = ", ".join(map(str, value)) or "-"
        else:
            text = str(value) if value is not None else "-"
        out.field(key, text, 1)


def summary_line(report: dict[str, Any]) -> str:
    s = report["summary"]
    if not report["loaded"]:
        return (
            f"{s['backends']} backend(s), {s['target_names']} target name(s) from metadata, {s['blocked']} blocked; nothing imported "
            "(`tilecore list --load` imports each backend in isolation; `tilecore doctor` also checks toolchains)"
        )
    parts = [f"{s['backends']} backend(s): {s['loaded']} loaded, {s['failed']} failed, {s['blocked']} blocked"]
    parts.append(f"{s['targets']} target(s), {s['available']} available here")
    if report["command"] == "doctor":
        parts.append(f"{s['toolchain_errors']} toolchain error(s)")
        if s.get("not_on_this_machine"):
            parts.append(f"{s['not_on_this_machine']} target(s) not on this machine")
    return "; ".join(parts)
