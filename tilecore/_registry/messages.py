"""Every error text of the registry longer than one line, worded, capped and tested in one place.

Each function builds the error (class, message and fix) for one situation; the checks that
decide to raise it stay in :mod:`~tilecore._registry.loading`,
:mod:`~tilecore._registry.resolution` and :mod:`~tilecore._registry.dispatch`.  One fact per
message; a list of choices is capped (``tilecore list`` shows the rest).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tilecore import hookspecs
from tilecore._registry import compat
from tilecore._registry.discovery import Backend, State
from tilecore._registry.table import BackendTable, known_targets
from tilecore._version import API_VERSION, PROJECT_URL, __version__
from tilecore.errors import (
    AmbiguousTargetError,
    BackendLoadError,
    HookReturnError,
    IncompatibleBackendError,
    MalformedTargetError,
    PluginValidationError,
    TargetOptionError,
    UnknownTargetError,
    choices_text,
    did_you_mean,
)

if TYPE_CHECKING:
    from tilecore.targets import TargetSpec

_API = f"{API_VERSION[0]}.{API_VERSION[1]}"


def example_text(spec: TargetSpec) -> str:
    """``name:value`` with the first option's first listed value (or a placeholder)."""
    if not spec.options:
        return spec.name
    first = spec.options[0]
    return f"{spec.name}:{first.choices[0] if first.choices else '<' + first.name + '>'}"


# -- loading -------------------------------------------------------------------------------


def bad_api_version(backend: Backend, text: object) -> PluginValidationError:
    return PluginValidationError(
        f"declares tilecore_api_version={text!r}; it must be 'MAJOR.MINOR', e.g. '{_API}'.",
        fix=f'set tilecore_api_version = "{_API}" in the backend',
        owner=backend.error_owner,
    )


def no_api_version(backend: Backend) -> PluginValidationError:
    return PluginValidationError(
        "does not declare tilecore_api_version.",
        fix=f'add tilecore_api_version = "{_API}" next to its hook implementations',
        owner=backend.error_owner,
    )


def other_api_major(backend: Backend, major: int, minor: int) -> IncompatibleBackendError:
    return IncompatibleBackendError(
        f"implements tilecore plugin API {major}.{minor}, but this tilecore {__version__} implements plugin API {_API}.",
        fix=f"install a version of the backend written for API {API_VERSION[0]}.x, or a tilecore that implements API {major}.x",
        owner=backend.error_owner,
    )


def newer_api_minor(backend: Backend, major: int, minor: int) -> IncompatibleBackendError:
    return IncompatibleBackendError(
        f"needs tilecore plugin API {major}.{minor}, newer than API {_API} of this tilecore {__version__}.",
        fix="upgrade tilecore (pip install -U tilecore)",
        owner=backend.error_owner,
    )


def import_hangs(backend: Backend, timeout: float, where: str = "") -> BackendLoadError:
    at = f" It hangs at {where}." if where else ""
    return BackendLoadError(
        f"importing {backend.value} did not finish within {timeout:g} s (it may hang at import).{at}",
        fix=f"block it with TILECORE_PLUGINS=no:{backend.block_name} and report it to its authors; "
        "`tilecore doctor` shows where it hangs; TILECORE_IMPORT_TIMEOUT raises the limit",
        owner=backend.error_owner,
    )


def import_crashes(backend: Backend, how: str) -> BackendLoadError:
    return BackendLoadError(
        f"importing {backend.value} {how} in a separate interpreter, so it was not imported here "
        "(target='auto', and names no metadata lists, try every backend; a crash would end this process).",
        fix=f"block it with TILECORE_PLUGINS=no:{backend.block_name} and report it to its authors; "
        "`tilecore doctor` shows where it crashes",
        owner=backend.error_owner,
    )


def same_entry_point(backend: Backend, twin: Backend) -> PluginValidationError:
    return PluginValidationError(
        f"registers the identical entry point {backend.name} = {backend.value} as {twin.label}; the same module cannot be two backends.",
        fix=f"uninstall one of the distributions {twin.distribution} and {backend.distribution}",
        owner=backend.error_owner,
    )


def bad_role(backend: Backend, role: object) -> PluginValidationError:
    return PluginValidationError(
        f"declares {hookspecs.ROLE_ATTRIBUTE}={role!r}; valid roles: {', '.join(hookspecs.ROLES)}.",
        fix=f"remove {hookspecs.ROLE_ATTRIBUTE} (a backend) or set it to {hookspecs.WRAPPER!r}",
        owner=backend.error_owner,
    )


def unknown_hook(backend: Backend, err: Exception) -> PluginValidationError:
    valid = ", ".join(sorted(h for h in dir(hookspecs) if h.startswith("tilecore_")))
    return PluginValidationError(
        f"implements a hook tilecore does not define: {err}. Valid hooks: {valid}.",
        fix="rename the hook implementation, or require a newer tilecore if the hook is from a newer plugin API",
        owner=backend.error_owner,
    )


def wrapper_declares(backend: Backend, hook: str) -> PluginValidationError:
    return PluginValidationError(
        f"has {hookspecs.ROLE_ATTRIBUTE}='wrapper' and implements {hook}; a wrapper declares no targets.",
        fix=f"remove {hook} from the wrapper, or remove {hookspecs.ROLE_ATTRIBUTE} to make it a backend",
        owner=backend.error_owner,
    )


def declares_nothing(backend: Backend, hook: str) -> PluginValidationError:
    return PluginValidationError(
        f"implements no {hook}; every backend declares its targets (an empty list for none).",
        fix=f"implement {hook}, or set {hookspecs.ROLE_ATTRIBUTE} = 'wrapper' for a plugin that only wraps other backends' hooks",
        owner=backend.error_owner,
    )


def name_twice(backend: Backend, name: str, first: str, second: str) -> PluginValidationError:
    return PluginValidationError(
        f"declares target name {name!r} twice (in {first!r} and {second!r}).",
        fix=f"declare {name!r} once in the backend ({backend.distribution})",
        owner=backend.error_owner,
    )


def builtin_without_opt_in(backend: Backend, name: str, spec: TargetSpec) -> PluginValidationError:
    return PluginValidationError(
        f"declares {name!r}, a target kind tilelang compiles by itself, without opting in.",
        fix=f"pick another name, or set TargetSpec({spec.name!r}, ..., replaces_builtin=True) and list {name!r} "
        'under [project.entry-points."tilecore.targets"]',
        owner=backend.error_owner,
    )


def _list_it(backend: Backend, name: str) -> str:
    """The fix for a target name missing from a backend's installed ``tilecore.targets`` metadata."""
    return (
        f'add {name} = "{backend.value}" under [project.entry-points."tilecore.targets"] of {backend.distribution}, '
        "then reinstall it: entry points are read from the installed metadata, so a pyproject.toml that already "
        "lists it needs the install run again (pip install -e . for an editable install)"
    )


def builtin_not_listed(backend: Backend, name: str) -> PluginValidationError:
    return PluginValidationError(
        f"takes over tilelang's built-in kind {name!r} but its metadata does not list it.",
        fix=_list_it(backend, name),
        owner=backend.error_owner,
    )


def not_in_metadata(backend: Backend, name: str, claims: Iterable[str]) -> PluginValidationError:
    return PluginValidationError(
        f"declares target {name!r}, which its distribution's tilecore.targets metadata does not list (it lists {choices_text(claims)}).",
        fix=_list_it(backend, name),
        owner=backend.error_owner,
    )


def listed_by_other(backend: Backend, name: str, owner: Backend) -> PluginValidationError:
    return PluginValidationError(
        f"declares target {name!r}, which {owner.label} lists in its metadata; "
        "a name listed in metadata belongs to that distribution in every process.",
        fix=f"rename the target in {backend.distribution}, or block one with TILECORE_PLUGINS=no:{backend.block_name}",
        owner=backend.error_owner,
    )


def outside_range(backend: Backend, problem: str) -> IncompatibleBackendError:
    return IncompatibleBackendError(f"{problem}.", fix=compat.range_fix(backend.distribution), owner=backend.error_owner)


def bad_seams(who: str, attribute: str, declared: object) -> PluginValidationError:
    return PluginValidationError(
        f"{who} declares {attribute}={declared!r}; it must map 'module:attribute' to a tuple of parameter names.",
        fix=f'write {attribute} = {{"tilelang.transform:Simplify": ()}}',
    )


def missing_seams(backend: Backend, found: list[str], version: str, tested: str | None) -> IncompatibleBackendError:
    return IncompatibleBackendError(
        f"calls tilelang internals that tilelang {version} does not have: "
        + "; ".join(found)
        + (f". It was tested with tilelang {tested}." if tested else "."),
        fix=compat.range_fix(backend.distribution),
        owner=backend.error_owner,
    )


# -- resolution ----------------------------------------------------------------------------


def ambiguous(kind: str, owners: list[tuple[Backend, str | None]]) -> AmbiguousTargetError:
    """``owners``: each claimant, with the name it declares ``kind`` under when loaded."""
    if all(name is None for _, name in owners):
        text = f"target {kind!r} is claimed by more than one installed backend: " + "; ".join(b.label for b, _ in owners) + "."
    else:
        text = f"target {kind!r} is claimed by more than one backend: " + "; ".join(f"{b.label} as {n!r}" for b, n in owners) + "."
    return AmbiguousTargetError(
        text, fix="uninstall one, or choose with " + " or ".join(f"TILECORE_PLUGINS=no:{b.block_name}" for b, _ in owners)
    )


def failed_backend(kind: str, backend: Backend) -> BackendLoadError:
    # backend.fix starts with the load error's own fix: the cause is quoted without it, so it is said once.
    return BackendLoadError(
        f"target {kind!r} is provided by {backend.label}, which failed to load: {backend.error_text(with_fix=False)}", fix=backend.fix
    )


def blocked_backend(kind: str, backend: Backend) -> BackendLoadError:
    """A known target whose backend the TILECORE_PLUGINS / TILECORE_DISABLE_PLUGIN_AUTOLOAD policy keeps from loading."""
    return BackendLoadError(f"target {kind!r} is provided by {backend.label}, which was not loaded: {backend.reason}.", fix=backend.fix)


def listed_not_declared(kind: str, backend: Backend) -> UnknownTargetError:
    return UnknownTargetError(
        f"target {kind!r}: {backend.label} lists it in its metadata but did not declare it when loaded "
        f"(it declared: {choices_text(backend.declared_names())}; a backend may declare no targets when, e.g., its device or SDK is absent).",
        fix=f"run `tilecore doctor` to see why {backend.distribution} declares no {kind!r} here",
    )


def malformed_name(target: object, kind: str, known: Iterable[str]) -> MalformedTargetError:
    return MalformedTargetError(
        f"target {target!r}: {kind!r} is not a valid target name (lower-case ASCII letters, digits, '_' or '-', "
        f"starting with a letter).{did_you_mean(kind, known)}",
        fix="run `tilecore list` for the installed targets",
    )


def malformed_options(err: Exception, spec: TargetSpec, backend: Backend) -> MalformedTargetError:
    return MalformedTargetError(
        f"{err} (target {spec.name!r} of {backend.owner})", fix=f"write it like {spec.name!r} or {example_text(spec)!r}"
    )


def unknown_target(table: BackendTable, kind: str) -> UnknownTargetError:
    declared = table.declared_targets()
    installed = [f"{s.name} ({b.owner})" for b, s in declared]
    listed = sorted(set(table.metadata_names()) - {n for _, s in declared for n in s.names})
    builtin = sorted(table.builtin_kinds())
    parts = [f"Unknown target {kind!r}.{did_you_mean(kind, table.known_names() | set(builtin))}"]
    parts.append(f"Installed tilecore targets: {choices_text(installed + listed)}.")
    if builtin:
        parts.append(f"tilelang's built-in target kinds: {', '.join(builtin)}.")
    dist = known_targets()["distributions"].get(kind)
    if dist is not None:
        source = known_targets().get("sources", {}).get(dist, "")
        parts.append(
            f"Target {kind!r} is provided by the distribution {dist!r}: pip install {dist} "
            f"(before it is on the package index: `pip install ./{source}` in a clone of {PROJECT_URL}, "
            f"or `pip install --find-links dist {dist}` after `make dist` there)."
        )
    failed = [f"{b.label}: {b.error_text()}" for b in table.entries if b.state is State.FAILED]
    if failed:
        parts.append("Backends that failed to load: " + "; ".join(failed) + ".")
    return UnknownTargetError(" ".join(parts))


def unreadable_attrs(spec: TargetSpec, backend: Backend, attrs: object, err: Exception) -> TargetOptionError:
    return TargetOptionError(
        f"could not read options from TVM attributes {attrs}: {type(err).__name__}: {err}", owner=backend.error_owner_of(spec)
    )


def contradicting_attrs(spec: TargetSpec, backend: Backend, name: str, given: object, value: object, attrs: object) -> TargetOptionError:
    return TargetOptionError(
        f"option {name}={given!r} contradicts {value!r} given through TVM attributes {attrs}; give one of them.",
        owner=backend.error_owner_of(spec),
    )


# -- dispatch ------------------------------------------------------------------------------


def hook_raised(backend: Backend, hook: str, where: str, err: Exception) -> BackendLoadError:
    return BackendLoadError(
        f"raised in {hook} for {where}: {type(err).__name__}: {err}",
        fix=f"report it to the authors of {backend.distribution}, or upgrade it (pip install -U {backend.distribution})",
        owner=backend.error_owner,
    )


def wrong_return(backend: Backend, hook: str, value: object, expected: str) -> HookReturnError:
    shown = repr(value) if not isinstance(value, (list, tuple)) else f"{type(value).__name__} of {[type(v).__name__ for v in value][:5]}"
    if len(shown) > 200:
        shown = shown[:197] + "..."
    return HookReturnError(
        f"hook {hook} returned {type(value).__name__} ({shown}); expected {expected}.",
        fix=f"this is a bug in {backend.distribution} {backend.version}: report it to its authors, or upgrade it",
        owner=backend.error_owner,
    )
