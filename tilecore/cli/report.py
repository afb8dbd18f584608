"""The data behind ``tilecore list`` and ``doctor``: one JSON-able report with fixed field types.

``SCHEMA_VERSION`` changes whenever a field changes type or meaning (docs/user-guide.md,
"JSON output", documents every field).  Every field is always present; a value that
does not apply is ``null``, never a different type.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from tilecore._registry import Backend, Registry, State, probe
from tilecore._registry.messages import example_text
from tilecore._registry.options import bind_options, target_kind
from tilecore._version import API_VERSION, __version__
from tilecore.errors import TilecoreError, did_you_mean
from tilecore.targets import ResolvedTarget, TargetSpec

SCHEMA_VERSION = 2


def version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def error_fields(err: BaseException | None) -> dict[str, str | None]:
    if err is None:
        return {"error_type": None, "error": None, "fix": None}
    return {"error_type": type(err).__name__, "error": " ".join(str(err).split()), "fix": getattr(err, "fix", "") or None}


def backend_entry(backend: Backend, *, targets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A backend's entry; ``targets`` (dicts from :func:`target_entry`) when it was loaded."""
    entry: dict[str, Any] = {
        "name": backend.name,
        "distribution": backend.distribution,
        "version": backend.version,
        "entry_point": backend.value,
        "state": backend.state.value,
        "role": backend.role if backend.state is State.LOADED else None,
        "api_version": backend.api_version,
        "metadata_targets": list(backend.claims),
        "metadata_complete": backend.complete,
        "duplicates": list(backend.duplicates),
        "reason": backend.reason or None,
        **error_fields(backend.error),
        "targets": targets or [],
    }
    if backend.state in (State.FAILED, State.BLOCKED):
        entry["fix"] = backend.fix
    return entry


def target_entry(backend: Backend, spec: TargetSpec) -> dict[str, Any]:
    availability = probe(spec)
    defaults: dict[str, str] | None = None
    defaults_error: str | None = None
    device: str | None = None
    try:
        defaults = bind_options(spec, {}, owner=backend.owner, passthrough=False)[0]
    except Exception as err:  # a detection default may fail; say why instead of crashing
        defaults_error = " ".join(str(err).split())
    if defaults is not None:
        try:
            device = str(spec.device(defaults)) if callable(spec.device) else spec.device
        except Exception as err:
            defaults_error = f"device: {type(err).__name__}: {err}"
    return {
        "name": spec.name,
        "description": spec.description,
        "aliases": list(spec.aliases),
        "options": [{"name": o.name, "doc": o.doc, "choices": list(o.choices), "pattern": o.pattern} for o in spec.options],
        "default_options": defaults,
        "default_options_error": defaults_error,
        "device": device,
        "priority": spec.priority,
        "upstream": spec.upstream.kind if spec.upstream is not None else None,
        "replaces_builtin": spec.replaces_builtin,
        "available": availability.ok,
        "reason": availability.reason,
        "unsupported": sorted(spec.unsupported),
        "toolchain": None,
    }


def toolchain_entry(registry: Registry, backend: Backend, spec: TargetSpec, chosen: str | None) -> dict[str, Any]:
    """Run setup for ``spec``: with ``chosen`` (a ``--target``), else default options, else the
    explicit target the backend suggests through ``tilecore_doctor_target``."""
    entry: dict[str, Any] = {
        "ok": False,
        "checked_with": chosen,
        "command": None,
        "name": None,
        "version": None,
        "location": None,
        "found_by": None,
        "fingerprint": None,
        "env": {},
        "notes": [],
        "error_type": None,
        "error": None,
        "fix": None,
        "default_error": None,
        "not_on_this_machine": False,
    }
    try:
        resolved: ResolvedTarget | None
        if chosen is not None:
            resolved = registry.resolve(chosen)
        else:
            try:
                resolved = registry.resolve({"kind": spec.name})
                entry["checked_with"] = str(resolved) if resolved is not None else spec.name
            except TilecoreError as default_error:
                suggestion = registry.doctor_target(backend, spec)
                if suggestion is None:
                    raise
                resolved = registry.resolve(suggestion)
                entry["checked_with"] = suggestion
                entry["command"] = f"tilecore doctor --target {suggestion}"
                entry["notes"].append(f"checked with {suggestion}, the backend's choice: the default options are unavailable here")
                entry["default_error"] = " ".join(str(default_error).split())
        if resolved is None:
            raise TilecoreError(f"{spec.name!r} resolved to a tilelang built-in target")
        found = registry.setup(resolved)
    except Exception as err:
        entry.update(error_fields(err))
        if entry["fix"] is None and entry["checked_with"] is None:  # only when no target could be checked at all
            entry["fix"] = f"check with explicit options: tilecore doctor --target {example_text(spec)}"
        return entry
    entry["ok"] = True
    if found is None:
        entry["notes"].append("the backend implements no setup hook")
        return entry
    entry.update(
        name=found.name,
        version=found.version,
        location=found.location,
        found_by=found.found_by,
        fingerprint=found.fingerprint,
        env=dict(found.env),
        notes=entry["notes"] + list(found.notes),
    )
    return entry


def backend_entry_in_child(name: str, distribution: str, value: str, *, doctor: bool, targets: list[str]) -> dict[str, Any]:
    """Load one backend in this (child) process and describe it (see :mod:`tilecore.cli.isolate`)."""
    registry = Registry()
    backend = next(
        (b for b in registry.backends() if (b.name, b.distribution, b.value) == (name, distribution, value)),
        None,
    )
    if backend is None:
        raise SystemExit(f"no backend {name} = {value} in {distribution}")
    if doctor:
        from tilecore._bridge import check_loading_backend

        registry.add_load_check(check_loading_backend)  # doctor reports a backend's missing tilelang seams as its load failure
    registry._load(backend)
    entries = [target_entry(backend, spec) for spec in backend.targets]
    used: list[str] = []
    if doctor and backend.state is State.LOADED:
        mine = backend.declared_names()
        chosen: dict[str, str] = {}
        for text in targets:
            kind = target_kind(text)
            if kind in mine:
                spec = next(s for s in backend.targets if kind in s.names)
                chosen[spec.name] = text
                used.append(text)
        for info, spec in zip(entries, backend.targets, strict=True):
            toolchain = toolchain_entry(registry, backend, spec, chosen.get(spec.name))
            # A platform this machine lacks (no device, and no toolchain either) is reported, not an error:
            # doctor stays green on a CPU machine.  A missing toolchain for an available target still fails.
            absent = not toolchain["ok"] and not info["available"] and toolchain["error_type"] == "ToolchainError"
            toolchain["not_on_this_machine"] = absent and spec.name not in chosen
            info["toolchain"] = toolchain
    entry = backend_entry(backend, targets=entries)
    entry["used_targets"] = used
    return entry


def metadata_report(registry: Registry) -> dict[str, Any]:
    """The report from metadata alone (nothing imported)."""
    backends = [backend_entry(b) for b in registry.backends()]
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "list",
        "loaded": False,
        "tilecore": __version__,
        "plugin_api": f"{API_VERSION[0]}.{API_VERSION[1]}",
        "tilelang": version_of("tilelang"),
        "autoload": registry.policy.autoload,
        "activation": None,
        "backends": backends,
        "summary": summary(backends),
        "environment": None,
        "sections": [],
    }


def check_target_args(registry: Registry, targets: list[str]) -> None:
    """Refuse ``--target`` values that are malformed or that no installed backend can own."""
    names = registry.metadata_names()
    legacy = any(not b.complete and b.state is not State.BLOCKED for b in registry.backends())
    for text in targets:
        kind = target_kind(text)
        if kind is None or not kind:
            raise TilecoreError(f"--target {text!r} is not a target")
        from tilecore._registry.options import split_target_string

        split_target_string(text)  # malformed options fail here, with the reason
        if kind not in names and not legacy:
            raise TilecoreError(
                f"--target {text!r}: no installed backend provides {kind!r}.{did_you_mean(kind, names)} "
                f"Installed targets: {', '.join(sorted(names)) or '<none>'}."
            )


def loaded_report(registry: Registry, *, doctor: bool, targets: list[str], timeout: float) -> dict[str, Any]:
    """Every allowed backend loaded in its own subprocess (see :mod:`tilecore.cli.isolate`)."""
    from tilecore.cli import isolate

    check_target_args(registry, targets)
    backends = registry.backends()
    jobs: list[tuple[list[str], str, str]] = [(["--activation"], "tilecore activation", "tilecore")]
    order: list[Backend] = []
    for backend in backends:
        if backend.state is State.BLOCKED:
            continue
        args = ["--name", backend.name, "--distribution", backend.distribution, "--value", backend.value]
        if doctor:
            args.append("--doctor")
        for text in targets:
            args += ["--target", text]
        jobs.append((args, backend.label, backend.block_name))
        order.append(backend)
    results = isolate.run_many(jobs, timeout)
    activation, per_backend = results[0], dict(zip((id(b) for b in order), results[1:], strict=True))
    entries = []
    used: set[str] = set()
    for backend in backends:
        result = per_backend.get(id(backend))
        if result is None:
            entries.append(backend_entry(backend))
            continue
        if "state" not in result:  # the child hung or crashed: describe it from metadata
            entry = backend_entry(backend)
            entry.update(state=State.FAILED.value, error_type=result["error_type"], error=result["error"], fix=result["fix"])
            entries.append(entry)
            continue
        used.update(result.pop("used_targets", []))
        entries.append(result)
    unused = [t for t in targets if t not in used]
    if unused:
        raise TilecoreError(f"--target {', '.join(map(repr, unused))}: no loaded backend declares it (see `tilecore list --load`)")
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "doctor" if doctor else "list",
        "loaded": True,
        "tilecore": __version__,
        "plugin_api": f"{API_VERSION[0]}.{API_VERSION[1]}",
        "tilelang": version_of("tilelang"),
        "autoload": registry.policy.autoload,
        "activation": {"ok": bool(activation.get("ok")), "error": activation.get("error")},
        "backends": entries,
        "summary": summary(entries),
        "environment": None,
        "sections": [],
    }


def summary(entries: list[dict[str, Any]]) -> dict[str, int | None]:
    states = [e["state"] for e in entries]
    targets = [t for e in entries for t in e["targets"]]
    loaded = any(s == State.LOADED.value for s in states)
    return {
        "backends": len(entries),
        "loaded": states.count(State.LOADED.value),
        "failed": states.count(State.FAILED.value),
        "blocked": states.count(State.BLOCKED.value),
        "not_loaded": states.count(State.DISCOVERED.value),
        # Declared targets are known only once loaded; without --load only names (with aliases) are.
        "targets": len(targets) if loaded else None,
        "target_names": sum(len(t["aliases"]) + 1 for t in targets) if loaded else sum(len(e["metadata_targets"]) for e in entries),
        "available": sum(1 for t in targets if t["available"]),
        "toolchain_errors": sum(1 for t in targets if _toolchain_failed(t["toolchain"])),
        "not_on_this_machine": sum(1 for t in targets if t["toolchain"] is not None and t["toolchain"].get("not_on_this_machine")),
    }


def _toolchain_failed(toolchain: dict[str, Any] | None) -> bool:
    return toolchain is not None and not toolchain["ok"] and not toolchain.get("not_on_this_machine")
