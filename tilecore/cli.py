"""``tilecore`` command line: diagnostics for installed backends.

``tilecore list``         backends, distributions, targets, availability, load errors
``tilecore doctor``       toolchains each backend's setup hook finds, versions, devices
``tilecore new-backend``  write a new backend distribution from the template
``tilecore cache``        stats, clear, prune of the local and remote kernel caches (tilecore.remote.cli)

``list`` and ``doctor`` accept ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from importlib import metadata
from typing import Any

import tilecore
from tilecore.registry import Backend, Registry, State, probe
from tilecore.targets import TargetSpec, bind_options


def _version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _default_options(backend: Backend, spec: TargetSpec) -> dict[str, str] | str:
    try:
        return bind_options(spec, {}, owner=backend.owner, passthrough=False)[0]
    except Exception as err:  # a detection default may fail; show why instead of crashing
        return f"<{type(err).__name__}: {err}>"


def _target_info(backend: Backend, spec: TargetSpec) -> dict[str, Any]:
    availability = probe(spec)
    defaults = _default_options(backend, spec)
    device: str | None = None
    if isinstance(defaults, dict):
        try:
            device = spec.device(defaults) if callable(spec.device) else spec.device
        except Exception as err:
            device = f"<{type(err).__name__}: {err}>"
    return {
        "name": spec.name,
        "description": spec.description,
        "aliases": list(spec.aliases),
        "options": [
            {"name": o.name, "doc": o.doc, "choices": list(o.choices), "pattern": o.pattern} for o in spec.options
        ],
        "default_options": defaults,
        "device": device,
        "priority": spec.priority,
        "upstream": spec.upstream.kind if spec.upstream is not None else None,
        "available": availability.ok,
        "reason": availability.reason,
        "unsupported": sorted(spec.unsupported),
    }


def collect_list(registry: Registry) -> dict[str, Any]:
    registry.load_all()
    backends = []
    for backend in registry.backends():
        backends.append(
            {
                "name": backend.name,
                "distribution": backend.distribution,
                "version": backend.version,
                "entry_point": backend.value,
                "state": backend.state.value,
                "reason": backend.reason,
                "error": backend.error_text() or None,
                "api_version": backend.api_version,
                "targets": [_target_info(backend, spec) for spec in backend.targets],
            }
        )
    return {
        "tilecore": tilecore.__version__,
        "plugin_api": "{}.{}".format(*tilecore.API_VERSION),
        "autoload": registry.policy.autoload,
        "activation_error": _activation_error(),
        "backends": backends,
    }


def _activation_error() -> str | None:
    err = tilecore.activation_error
    return f"{type(err).__name__}: {err}" if err is not None else None


def collect_doctor(registry: Registry, targets: list[str] | None = None) -> dict[str, Any]:
    """``collect_list`` plus each target's toolchain.  ``targets`` (user target strings) choose
    the options setup runs with, e.g. an arch on a machine where none can be detected."""
    listing = collect_list(registry)
    chosen = {}
    for text in targets or []:
        resolved = registry.resolve(text)
        if resolved is None:
            raise SystemExit(f"tilecore doctor: {text!r} is not a tilecore target (tilelang handles it itself)")
        chosen[resolved.name] = resolved
    for entry, backend in zip(listing["backends"], registry.backends(), strict=True):
        for info, spec in zip(entry["targets"], backend.targets, strict=True):
            info["toolchain"] = _toolchain(registry, spec, chosen.get(spec.name))
    listing["python"] = f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"
    listing["packages"] = {name: _version_of(name) for name in ("tilelang", "torch", "pluggy", "apache-tvm-ffi", "tilecore")}
    from tilecore.remote import printable_env

    listing["environment"] = {
        key: printable_env(key, os.environ[key])
        for key in sorted(os.environ)
        if key.startswith(("TILECORE_", "TILELANG_"))
    }
    from tilecore.paths import cache_root

    listing["cache_dir"] = str(cache_root())
    from tilecore import remote

    listing["remote_cache"] = remote.doctor_report()
    return listing


def _toolchain(registry: Registry, spec: TargetSpec, resolved: Any = None) -> dict[str, Any]:
    try:
        resolved = resolved or registry.resolve({"kind": spec.name})
        if resolved is None:
            return {"error": "not resolvable"}
        found = registry.setup(resolved)
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}
    if found is None:
        return {"error": None, "name": None, "note": "backend implements no setup hook"}
    return {
        "name": found.name,
        "version": found.version,
        "location": found.location,
        "found_by": found.found_by,
        "fingerprint": found.fingerprint,
        "env": dict(found.env),
        "notes": list(found.notes),
    }


def _print_list(data: dict[str, Any], doctor: bool = False) -> None:
    print(f"tilecore {data['tilecore']} (plugin API {data['plugin_api']}), autoload {'on' if data['autoload'] else 'off'}")
    if data["activation_error"]:
        print(f"  ! not active: {data['activation_error']}")
    if doctor:
        print(f"python: {data['python']}")
        print("packages: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in data["packages"].items()))
        print(f"cache dir: {data['cache_dir']}")
        from tilecore.remote.cli import doctor_lines

        for line in doctor_lines(data["remote_cache"]):
            print(line)
        for key, value in data["environment"].items():
            print(f"  {key}={value}")
    if not data["backends"]:
        print("no backends installed (entry-point group 'tilecore.backends'); e.g. pip install tilelang-<vendor>")
    for b in data["backends"]:
        head = f"\n{b['name']}  {b['distribution']} {b['version']}  [{b['state']}]"
        if b["api_version"]:
            head += f"  API {b['api_version']}"
        print(head)
        if b["reason"]:
            print(f"  {b['reason']}")
        if b["error"]:
            print(f"  error: {b['error']}")
        for t in b["targets"]:
            mark = "available" if t["available"] else "unavailable"
            aliases = f" (aliases: {', '.join(t['aliases'])})" if t["aliases"] else ""
            print(f"  target {t['name']}{aliases}: {t['description']}")
            print(f"    {mark}: {t['reason']}")
            defaults = t["default_options"]
            if isinstance(defaults, dict):
                opts = ", ".join(f"{k}={v}" for k, v in defaults.items()) or "none"
                print(f"    options: {opts}; device {t['device']}; priority {t['priority']}")
            else:
                print(f"    options: {defaults}")
            if t["upstream"]:
                print(f"    lowering, codegen and adapter: tilelang's built-in {t['upstream']!r} backend")
            if doctor:
                tc = t.get("toolchain", {})
                if tc.get("error"):
                    print(f"    toolchain: ERROR {tc['error']}")
                elif tc.get("name"):
                    print(f"    toolchain: {tc['name']} {tc['version']} at {tc['location']} (found by {tc['found_by']})")
                    for note in tc.get("notes", []):
                        print(f"      {note}")
                else:
                    print(f"    toolchain: {tc.get('note', 'unknown')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tilecore", description="Diagnostics for TileLang backends installed as tilecore plugins.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("list", "installed backends and their targets"), ("doctor", "toolchains, versions and devices")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "doctor":
            cmd.add_argument(
                "--target", action="append", metavar="TARGET",
                help="run setup for TARGET as written in user code (e.g. an explicit arch); repeatable",
            )
    new = sub.add_parser("new-backend", help="write a new backend distribution from the template", add_help=False)
    new.add_argument("rest", nargs=argparse.REMAINDER)
    cache = sub.add_parser("cache", help="stats, clear, prune of the local and remote kernel caches", add_help=False)
    cache.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if args.command == "new-backend":
        from tilecore import template

        return template.main(args.rest)
    if args.command == "cache":
        from tilecore.remote import cli as cache_cli

        return cache_cli.main(args.rest)

    registry = tilecore.get_registry()
    data = collect_doctor(registry, args.target) if args.command == "doctor" else collect_list(registry)
    if args.json:
        json.dump(data, sys.stdout, indent=2, default=str)
        print()
    else:
        _print_list(data, doctor=args.command == "doctor")
    failed = any(b["state"] == State.FAILED.value for b in data["backends"])
    return 1 if failed and args.command == "doctor" else 0


if __name__ == "__main__":
    sys.exit(main())
