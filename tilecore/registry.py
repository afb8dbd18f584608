"""The backend registry: loading, target index, resolution and hook dispatch.

Loading is lazy and failure-isolated (the JAX ``xla_bridge`` model): a backend
is imported the first time one of its targets is named (or when
``target="auto"`` needs every backend; diagnostics import each backend in its
own subprocess, see :mod:`tilecore.cli`).  Anything that goes wrong while
importing it, checking its API version or role, collecting and validating its
targets is recorded on its :class:`Backend` record and raised only when the
user names one of its targets.  Which backend owns a name is decided from
metadata first (:meth:`Registry._lookup`), so the answer never depends on
load order.  Every hook's return value is checked (:func:`check_return`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from typing import Any

import pluggy

from tilecore import compat, hookspecs
from tilecore._version import API_VERSION, __version__
from tilecore.discovery import DiscoveredBackend, PluginPolicy, discover
from tilecore.errors import (
    AmbiguousTargetError,
    BackendLoadError,
    HookReturnError,
    IncompatibleBackendError,
    MalformedTargetError,
    PluginValidationError,
    TargetOptionError,
    TilecoreError,
    UnknownTargetError,
    choices_text,
    did_you_mean,
)
from tilecore.kernel import Toolchain
from tilecore.targets import (
    Availability,
    ResolvedTarget,
    TargetSpec,
    bind_options,
    is_target_name,
    raw_options,
    target_kind,
)

IN_PROCESS = "<in-process>"

#: Seconds an import may take when every backend is loaded for ``target="auto"`` or an
#: unlisted name (``TILECORE_IMPORT_TIMEOUT``); a backend the user names is imported normally.
DEFAULT_IMPORT_TIMEOUT = 60.0


class State(str, Enum):
    DISCOVERED = "not loaded"
    LOADED = "loaded"
    FAILED = "failed"
    BLOCKED = "blocked"


@dataclass(eq=False)
class Backend:
    """One backend: an entry point or an object given to :func:`tilecore.register`.

    ``claims`` are the target names its distribution's metadata lists
    (``complete`` when the metadata lists every name; see
    :mod:`tilecore.discovery`); ``targets`` what it declared once loaded.
    """

    name: str
    distribution: str
    version: str
    value: str
    state: State = State.DISCOVERED
    reason: str = ""
    error: BaseException | None = None
    plugin: object | None = None
    api_version: str | None = None
    targets: tuple[TargetSpec, ...] = ()
    role: str = hookspecs.BACKEND
    claims: tuple[str, ...] = ()
    complete: bool = False
    duplicates: tuple[str, ...] = ()
    discovered: DiscoveredBackend | None = field(default=None, repr=False)

    @property
    def owner(self) -> str:
        return f"{self.distribution} {self.version}"

    @property
    def label(self) -> str:
        return f"backend {self.name!r} ({self.owner})"

    def matches_policy_name(self, names: Iterable[str]) -> bool:
        return bool({self.name, self.distribution} & set(names))

    def error_text(self) -> str:
        if self.error is None:
            return ""
        return f"{type(self.error).__name__}: {self.error}"

    @property
    def fix(self) -> str:
        """What to do about a failed or blocked backend ("" when nothing is wrong)."""
        if self.state is State.BLOCKED:
            return f"unset the TILECORE_PLUGINS / TILECORE_DISABLE_PLUGIN_AUTOLOAD setting that blocks it ({self.reason})"
        if self.state is not State.FAILED:
            return ""
        specific = getattr(self.error, "fix", "")
        generic = f"block it with TILECORE_PLUGINS=no:{self.block_name}"
        if specific:
            return f"{specific}; or {generic}"
        return f"reinstall or upgrade it (pip install --force-reinstall {self.distribution}), or report it to its authors; or {generic}"

    @property
    def block_name(self) -> str:
        """The ``TILECORE_PLUGINS=no:...`` name that blocks this backend alone."""
        return self.distribution if self.duplicates else self.name

    def declared_names(self) -> set[str]:
        return {name for spec in self.targets for name in spec.names}


def parse_api_version(text: object, *, who: str) -> tuple[int, int]:
    try:
        major, minor = (int(p) for p in str(text).split("."))
    except ValueError:
        raise PluginValidationError(
            f"{who} declares tilecore_api_version={text!r}; it must be 'MAJOR.MINOR', e.g. '{API_VERSION[0]}.{API_VERSION[1]}'.",
            fix=f'set tilecore_api_version = "{API_VERSION[0]}.{API_VERSION[1]}" in the backend',
        ) from None
    return major, minor


def check_api_version(plugin: object, *, who: str) -> str:
    declared = getattr(plugin, "tilecore_api_version", None)
    if declared is None:
        raise PluginValidationError(
            f"{who} does not declare tilecore_api_version.",
            fix=f'add tilecore_api_version = "{API_VERSION[0]}.{API_VERSION[1]}" next to its hook implementations',
        )
    major, minor = parse_api_version(declared, who=who)
    core = f"{API_VERSION[0]}.{API_VERSION[1]}"
    if major != API_VERSION[0]:
        raise IncompatibleBackendError(
            f"{who} implements tilecore plugin API {major}.{minor}, but this tilecore {__version__} implements plugin API {core}.",
            fix=f"install a version of the backend written for API {API_VERSION[0]}.x, or a tilecore that implements API {major}.x",
        )
    if minor > API_VERSION[1]:
        raise IncompatibleBackendError(
            f"{who} needs tilecore plugin API {major}.{minor}, newer than API {core} of this tilecore {__version__}.",
            fix="upgrade tilecore (pip install -U tilecore)",
        )
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=1)
def _known_targets() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("tilecore").joinpath("known_targets.json").read_text())
    return data


def _known_distributions() -> dict[str, str]:
    return dict(_known_targets()["distributions"])


def loaded_host_kinds() -> tuple[str, ...]:
    """The host compiler's own target kinds: the live list once its target registry is imported
    (never imported here), else the list recorded for the supported tilelang in known_targets.json,
    so the answer is the same before and after ``import tilelang``."""
    module = sys.modules.get("tvm.target")
    target_cls = getattr(module, "Target", None) if module is not None else None
    if target_cls is None:
        return tuple(_known_targets()["host_kinds"])
    return tuple(target_cls.list_kinds())


def import_timeout(environ: Mapping[str, str] | None = None) -> float:
    environ = os.environ if environ is None else environ
    text = environ.get("TILECORE_IMPORT_TIMEOUT", "")
    try:
        return float(text) if text else DEFAULT_IMPORT_TIMEOUT
    except ValueError:
        return DEFAULT_IMPORT_TIMEOUT


#: A check run on each backend as it loads (:meth:`Registry.add_load_check`); raises to refuse it.
LoadCheck = Callable[[Backend, object], None]


class Registry:
    """All backends of one process.  Thread-safe; one instance lives in :mod:`tilecore`.

    ``builtin_kinds`` names the targets the host compiler (tilelang) handles by
    itself; naming one of them never imports a backend that does not list it
    in metadata, and an unknown one is left to tilelang rather than reported
    as unknown.  See "Resolution rule" in docs/architecture.md.
    """

    def __init__(self, policy: PluginPolicy | None = None, builtin_kinds: Callable[[], Iterable[str]] = loaded_host_kinds) -> None:
        self.policy = policy or PluginPolicy.from_env()
        self._builtin_kinds = builtin_kinds
        self._lock = threading.RLock()
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._backends: list[Backend] = []
        self._discovered = False
        self._index: dict[str, list[tuple[Backend, TargetSpec]]] = {}
        self._setups: dict[ResolvedTarget, Toolchain] = {}
        self._callers: dict[tuple[int, str], Any] = {}
        self._load_checks: list[LoadCheck] = []

    def add_load_check(self, check: LoadCheck) -> None:
        """Run ``check(backend, plugin)`` on every backend as it loads (after its API-version check).

        A check raises to refuse the backend; the refusal is recorded like any load failure.  The
        bridge adds the check of a backend's declared tilelang seams this way, so this module
        never touches tilelang.
        """
        if check not in self._load_checks:
            self._load_checks.append(check)

    def builtin_kinds(self) -> set[str]:
        return set(self._builtin_kinds())

    # -- listing ---------------------------------------------------------------------------

    def backends(self) -> list[Backend]:
        """Every backend known so far; reads entry-point metadata, imports nothing."""
        self._ensure_discovered()
        return list(self._backends)

    def _ensure_discovered(self) -> None:
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            for found in discover():
                backend = Backend(
                    found.name,
                    found.distribution,
                    found.version,
                    found.value,
                    claims=found.target_names,
                    complete=found.complete,
                    duplicates=found.duplicates,
                    discovered=found,
                )
                blocked = self.policy.decide(found.name)
                if blocked is not None and found.distribution in self.policy.allowed:
                    blocked = None
                if blocked is None and found.distribution in self.policy.blocked:
                    blocked = f"blocked by TILECORE_PLUGINS=no:{found.distribution}"
                if blocked is not None:
                    backend.state, backend.reason = State.BLOCKED, blocked
                self._backends.append(backend)
            self._discovered = True

    def metadata_names(self) -> dict[str, list[Backend]]:
        """Target name -> allowed backends whose metadata claims it (imports nothing)."""
        names: dict[str, list[Backend]] = {}
        for backend in self.backends():
            if backend.state is State.BLOCKED:
                continue
            for name in backend.claims:
                names.setdefault(name, []).append(backend)
        return names

    # -- loading ---------------------------------------------------------------------------

    def load_all(self, timeout: float | None = None) -> None:
        """Import every allowed backend (``target="auto"``, names no metadata lists).

        Each import runs under a deadline (``timeout`` seconds, default
        ``TILECORE_IMPORT_TIMEOUT`` or 60): one that does not finish is recorded
        as failed, naming the backend, instead of hanging the caller.
        """
        deadline = import_timeout() if timeout is None else timeout
        for backend in self.backends():
            if backend.state is State.DISCOVERED:
                self._load(backend, timeout=deadline)

    def _load(self, backend: Backend, timeout: float | None = None) -> None:
        with self._lock:
            if backend.state is not State.DISCOVERED:
                return
            assert backend.discovered is not None
            twin = next((b for b in self._backends if b is not backend and b.value == backend.value and b.state is State.LOADED), None)
            if twin is not None:
                self._fail(
                    backend,
                    PluginValidationError(
                        f"{backend.label} registers the identical entry point {backend.name} = {backend.value} as {twin.label}; "
                        "the same module cannot be two backends.",
                        fix=f"uninstall one of the distributions {twin.distribution} and {backend.distribution}",
                    ),
                )
                return
            problem = compat.backend_range_problem(backend.distribution, backend.version)
            if problem is not None and compat.check_mode() == "strict":
                self._fail(backend, IncompatibleBackendError(f"{backend.label}: {problem}.", fix=compat.range_fix(backend.distribution)))
                return
            try:
                plugin = self._import(backend, timeout)
            except BaseException as err:
                if isinstance(err, KeyboardInterrupt):
                    raise
                self._fail(backend, err)
                return
            try:
                self._adopt(backend, plugin)
            except Exception as err:
                self._fail(backend, err)

    @staticmethod
    def _import(backend: Backend, timeout: float | None) -> object:
        """Load the entry point, in this thread, or under a deadline in a helper thread."""
        assert backend.discovered is not None
        entry_point = backend.discovered.entry_point
        if timeout is None:
            return entry_point.load()
        outcome: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                outcome.append((True, entry_point.load()))
            except BaseException as err:  # handed to the caller below
                outcome.append((False, err))

        worker = threading.Thread(target=run, name=f"tilecore-import-{backend.name}", daemon=True)
        worker.start()
        worker.join(timeout)
        if not outcome:
            raise BackendLoadError(
                f"{backend.label}: importing {backend.value} did not finish within {timeout:g} s (it may hang at import).",
                fix=f"block it with TILECORE_PLUGINS=no:{backend.block_name} and report it to its authors; "
                "`tilecore doctor` shows where it hangs; TILECORE_IMPORT_TIMEOUT raises the limit",
            )
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _fail(self, backend: Backend, err: BaseException) -> None:
        backend.state, backend.error = State.FAILED, err
        if backend.plugin is not None and self._pm.is_registered(backend.plugin):
            self._pm.unregister(backend.plugin)
        backend.plugin = None
        backend.targets = ()
        self._forget(backend)

    def _own_impl(self, plugin: object, hook: str) -> Any:
        caller = getattr(self._pm.hook, hook)
        return next((impl for impl in caller.get_hookimpls() if impl.plugin is plugin), None)

    def _adopt(self, backend: Backend, plugin: object) -> None:
        """Validate and register ``plugin`` as ``backend``; all-or-nothing."""
        backend.api_version = check_api_version(plugin, who=backend.label)
        for check in self._load_checks:
            check(backend, plugin)
        problem = compat.backend_range_problem(backend.distribution, backend.version)
        if problem is not None and compat.check_mode() == "seams":
            compat.warn_once(f"{backend.label}: {problem}; loaded because {compat.CHECK_VARIABLE}=seams and its declared seams check out.")
        role = getattr(plugin, hookspecs.ROLE_ATTRIBUTE, hookspecs.BACKEND)
        if role not in hookspecs.ROLES:
            raise PluginValidationError(
                f"{backend.label} declares {hookspecs.ROLE_ATTRIBUTE}={role!r}; valid roles: {', '.join(hookspecs.ROLES)}.",
                fix=f"remove {hookspecs.ROLE_ATTRIBUTE} (a backend) or set it to {hookspecs.WRAPPER!r}",
            )
        try:
            self._pm.register(plugin, name=f"{backend.name}@{backend.distribution}")
        except (pluggy.PluginValidationError, ValueError) as err:
            raise PluginValidationError(f"{backend.label}: {err}") from err
        backend.plugin = plugin
        try:
            try:
                self._pm.check_pending()
            except pluggy.PluginValidationError as err:
                raise PluginValidationError(
                    f"{backend.label} implements a hook tilecore does not define: {err}. "
                    f"Valid hooks: {', '.join(sorted(h for h in dir(hookspecs) if h.startswith('tilecore_')))}.",
                    fix="rename the hook implementation, or require a newer tilecore if the hook is from a newer plugin API",
                ) from err
            targets = self._declared_targets(backend, plugin, role)
            self._validate_names(backend, targets)
        except Exception:
            self._pm.unregister(plugin)
            backend.plugin = None
            raise
        backend.role = role
        backend.targets = targets
        backend.state = State.LOADED
        for spec in backend.targets:
            for name in spec.names:
                self._index.setdefault(name, []).append((backend, spec))
        self._callers.clear()

    def _declared_targets(self, backend: Backend, plugin: object, role: str) -> tuple[TargetSpec, ...]:
        hook = "tilecore_declare_targets"
        impl = self._own_impl(plugin, hook)
        if role == hookspecs.WRAPPER:
            if impl is not None:
                raise PluginValidationError(
                    f"{backend.label} has {hookspecs.ROLE_ATTRIBUTE}='wrapper' and implements {hook}; a wrapper declares no targets.",
                    fix=f"remove {hook} from the wrapper, or remove {hookspecs.ROLE_ATTRIBUTE} to make it a backend",
                )
            return ()
        if impl is None:
            raise PluginValidationError(
                f"{backend.label} implements no {hook}; every backend declares its targets (an empty list for none).",
                fix=f"implement {hook}, or set {hookspecs.ROLE_ATTRIBUTE} = 'wrapper' for a plugin that only wraps other backends' hooks",
            )
        result = impl.function()
        check_return(backend, hook, result)
        return tuple(result)

    def _validate_names(self, backend: Backend, targets: tuple[TargetSpec, ...]) -> None:
        """Load-time rules that keep resolution independent of load order (docs/architecture.md)."""
        seen: dict[str, str] = {}
        for spec in targets:
            for name in spec.names:
                if name in seen:
                    raise PluginValidationError(
                        f"{backend.label} declares target name {name!r} twice (in {seen[name]!r} and {spec.name!r}).",
                        fix=f"declare {name!r} once in the backend ({backend.distribution})",
                    )
                seen[name] = spec.name
        in_process = backend.distribution == IN_PROCESS
        builtin = self.builtin_kinds()
        claims = set(backend.claims)
        for spec in targets:
            for name in spec.names:
                if name in builtin:
                    if not spec.replaces_builtin:
                        raise PluginValidationError(
                            f"{backend.label} declares {name!r}, a target kind tilelang compiles by itself, without opting in.",
                            fix=f"pick another name, or set TargetSpec({spec.name!r}, ..., replaces_builtin=True) and list {name!r} "
                            'under [project.entry-points."tilecore.targets"]',
                        )
                    if not in_process and not (backend.complete and name in claims):
                        raise PluginValidationError(
                            f"{backend.label} takes over tilelang's built-in kind {name!r} but its metadata does not list it.",
                            fix=f'add {name} = "{backend.value}" under [project.entry-points."tilecore.targets"] of {backend.distribution}',
                        )
                if in_process or name in claims:
                    continue
                if backend.complete:
                    raise PluginValidationError(
                        f"{backend.label} declares target {name!r}, which its distribution's tilecore.targets metadata does not list "
                        f"(it lists {choices_text(claims)}).",
                        fix=f'add {name} = "{backend.value}" under [project.entry-points."tilecore.targets"] of {backend.distribution}',
                    )
                others = [b for b in self._backends if b is not backend and b.state is not State.BLOCKED and name in b.claims]
                if others:
                    owner = others[0]
                    raise PluginValidationError(
                        f"{backend.label} declares target {name!r}, which {owner.label} lists in its metadata; "
                        "a name listed in metadata belongs to that distribution in every process.",
                        fix=f"rename the target in {backend.distribution}, or block one with TILECORE_PLUGINS=no:{backend.block_name}",
                    )

    def _forget(self, backend: Backend) -> None:
        for name in list(self._index):
            self._index[name] = [(b, s) for b, s in self._index[name] if b is not backend]
            if not self._index[name]:
                del self._index[name]
        self._callers.clear()

    def register(self, plugin: object, name: str | None = None) -> Backend:
        """Register an in-process backend (notebooks, tests).  Errors raise at once."""
        self._ensure_discovered()
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        version = str(getattr(plugin, "__version__", "0"))
        with self._lock:
            if any(b.name == name and b.distribution == IN_PROCESS for b in self._backends):
                raise PluginValidationError(f"an in-process backend named {name!r} is already registered")
            backend = Backend(name, IN_PROCESS, version, repr(plugin), complete=True)
            self._adopt(backend, plugin)
            backend.claims = tuple(sorted(backend.declared_names()))
            self._backends.append(backend)
            return backend

    def unregister(self, backend: Backend) -> None:
        with self._lock:
            if backend.plugin is not None and self._pm.is_registered(backend.plugin):
                self._pm.unregister(backend.plugin)
            self._forget(backend)
            self._setups = {t: tc for t, tc in self._setups.items() if t.backend != backend.name}
            if backend in self._backends:
                self._backends.remove(backend)

    # -- targets ---------------------------------------------------------------------------

    def declared_targets(self) -> list[tuple[Backend, TargetSpec]]:
        """(backend, spec) of every loaded backend, in load order."""
        return [(b, s) for b in self._backends if b.state is State.LOADED for s in b.targets]

    def _lookup(self, kind: str) -> list[tuple[Backend, TargetSpec]]:
        """Who declares ``kind``.  Resolution rule (the same in a fresh process and after ``load_all``):

        1. Metadata first: allowed backends whose distribution lists ``kind``.  Two of them is an
           :class:`AmbiguousTargetError` before anything is imported; one is imported and must
           declare it.
        2. A kind no metadata lists and the host compiler knows: not ours (``[]``), nothing imported.
        3. Otherwise only *legacy* backends (no ``tilecore.targets`` metadata) may declare it: those
           are imported, never a backend whose metadata is complete.
        """
        claimants = self.metadata_names().get(kind, [])
        if len(claimants) > 1:
            raise AmbiguousTargetError(
                f"target {kind!r} is claimed by more than one installed backend: " + "; ".join(b.label for b in claimants) + ".",
                fix="uninstall one, or choose with " + " or ".join(f"TILECORE_PLUGINS=no:{b.block_name}" for b in claimants),
            )
        if claimants:
            backend = claimants[0]
            self._load(backend)
            if backend.state is State.FAILED:
                raise BackendLoadError(
                    f"target {kind!r} is provided by {backend.label}, which failed to load: {backend.error_text()}",
                    fix=backend.fix,
                ) from backend.error
            hits = [(backend, spec) for spec in backend.targets if kind in spec.names]
            if hits or backend.complete:
                return hits
        if kind in self.builtin_kinds():
            return []
        indexed = self._index.get(kind)
        if indexed:
            return indexed
        deadline = import_timeout()
        for backend in self.backends():
            if not backend.complete and backend.state is State.DISCOVERED:
                self._load(backend, timeout=deadline)
        return self._index.get(kind) or []

    def owns(self, target: object) -> bool:
        """Whether a string/dict target names a tilecore-declared target (may import backends)."""
        kind = target_kind(target)
        return kind is not None and bool(self._lookup(kind))

    def resolve(self, target: str | Mapping[str, Any] | ResolvedTarget) -> ResolvedTarget | None:
        """Resolve user input to a declared target.

        Returns ``None`` for a kind that no backend declares but the host
        compiler knows (tilelang handles it), and for strings in the host
        compiler's own syntax (``"<kind> -attr=value"``, tags ``"vendor/model"``).
        Raises a :class:`TilecoreError` for anything else that cannot be
        resolved, malformed input included.
        """
        if isinstance(target, ResolvedTarget):
            return target
        kind = target_kind(target)
        if kind is None:
            return None
        if isinstance(target, str) and (len(target.split()) > 1 or "/" in kind):
            return None  # the host compiler's own string syntax
        if not is_target_name(kind):
            raise MalformedTargetError(
                f"target {target!r}: {kind!r} is not a valid target name (lower-case ASCII letters, digits, '_' or '-', "
                f"starting with a letter).{did_you_mean(kind, self._known_names())}",
                fix="run `tilecore list` for the installed targets",
            )
        with self._lock:
            hits = self._lookup(kind)
            if not hits:
                self._raise_if_backend_unusable(kind)
                if kind in self.builtin_kinds():
                    return None
                raise UnknownTargetError(self._unknown_target_message(kind))
        if len(hits) > 1:
            owners = "; ".join(f"{b.label} as {s.name!r}" for b, s in hits)
            raise AmbiguousTargetError(
                f"target {kind!r} is claimed by more than one backend: {owners}.",
                fix="uninstall one, or choose with " + " or ".join(f"TILECORE_PLUGINS=no:{b.block_name}" for b, _ in hits),
            )
        backend, spec = hits[0]
        try:
            raw = raw_options(target)
        except MalformedTargetError as err:
            raise MalformedTargetError(
                f"{err} (target {spec.name!r} of {backend.owner})", fix=f"write it like {spec.name!r} or {example_text(spec)!r}"
            ) from None
        passthrough = spec.upstream is not None
        options, _extra = bind_options(spec, self._with_upstream_attrs(spec, raw, backend), owner=backend.owner, passthrough=passthrough)
        return ResolvedTarget(spec, options, backend.name, backend.distribution, backend.version)

    @staticmethod
    def _with_upstream_attrs(spec: TargetSpec, raw: dict[str, Any], backend: Backend) -> dict[str, Any]:
        """Fill options a delegated target stores under TVM attribute names (``{"kind": k, "mcpu": ...}``)
        from those attributes, so upstream's spelling goes through the backend's checks; refuse a
        contradiction between the option and the attribute."""
        if spec.upstream is None or spec.upstream.options_from_attrs is None:
            return raw
        declared = {opt.name for opt in spec.options}
        attrs = {k: v for k, v in raw.items() if k not in declared and k != ""}
        if not attrs:
            return raw
        try:
            mapped = dict(spec.upstream.options_from_attrs(attrs))
        except Exception as err:
            raise TargetOptionError(
                f"target {spec.name!r} ({backend.owner}) could not read options from TVM attributes {attrs}: {type(err).__name__}: {err}"
            ) from err
        merged = dict(raw)
        positional = spec.options[0].name if spec.options else None
        for name, value in mapped.items():
            given = merged.get(name, merged.get("") if name == positional else None)
            if given is not None and str(given).strip() != str(value):
                raise TargetOptionError(
                    f"target {spec.name!r} ({backend.owner}): option {name}={given!r} contradicts {value!r} given through TVM "
                    f"attributes {attrs}; give one of them."
                )
            if given is None:
                merged[name] = value
        return merged

    def upstream_extra(self, target: str | Mapping[str, Any]) -> dict[str, Any]:
        """Keys of a target that the delegating spec does not declare: passed to TVM as attributes
        (TVM refuses unknown ones), never dropped."""
        resolved = self.resolve(target)
        if resolved is None:
            return {}
        backend = self.backend_of(resolved)
        raw = self._with_upstream_attrs(resolved.spec, raw_options(target), backend)
        return bind_options(resolved.spec, raw, owner=resolved.owner, passthrough=True)[1]

    def _raise_if_backend_unusable(self, kind: str) -> None:
        for backend in self._backends:
            if kind not in backend.claims and backend.name != kind:
                continue
            if backend.state is State.FAILED:
                raise BackendLoadError(
                    f"target {kind!r} is provided by {backend.label}, which failed to load: {backend.error_text()}",
                    fix=backend.fix,
                ) from backend.error
            if backend.state is State.BLOCKED:
                raise UnknownTargetError(
                    f"target {kind!r} is provided by {backend.label}, which is not loaded: {backend.reason}.",
                    fix=backend.fix,
                )
            if backend.state is State.LOADED and backend.complete and kind in backend.claims:
                declared = choices_text(backend.declared_names())
                raise UnknownTargetError(
                    f"target {kind!r}: {backend.label} lists it in its metadata but did not declare it when loaded "
                    f"(it declared: {declared}; a backend may declare no targets when, e.g., its device or SDK is absent).",
                    fix=f"run `tilecore doctor` to see why {backend.distribution} declares no {kind!r} here",
                )

    def _known_names(self) -> set[str]:
        names = set(self.metadata_names())
        names.update(name for _, spec in self.declared_targets() for name in spec.names)
        return names

    def _unknown_target_message(self, kind: str) -> str:
        installed = [f"{s.name} ({b.owner})" for b, s in self.declared_targets()]
        listed = sorted(set(self.metadata_names()) - {n for _, s in self.declared_targets() for n in s.names})
        parts = [f"Unknown target {kind!r}.{did_you_mean(kind, self._known_names() | self.builtin_kinds())}"]
        parts.append(f"Installed tilecore targets: {choices_text(installed + listed)}.")
        builtin = sorted(self.builtin_kinds())
        if builtin:
            parts.append(f"tilelang's built-in target kinds: {', '.join(builtin)}.")
        dist = _known_distributions().get(kind)
        if dist is not None:
            parts.append(f"Target {kind!r} is provided by the distribution {dist!r}: pip install {dist}")
        failed = [f"{b.label}: {b.error_text()}" for b in self._backends if b.state is State.FAILED]
        if failed:
            parts.append("Backends that failed to load: " + "; ".join(failed) + ".")
        return " ".join(parts)

    def select_auto(self) -> ResolvedTarget | None:
        """The available declared target of highest priority, with default options.

        Imports every allowed backend, each under the import deadline (see :meth:`load_all`).
        """
        self.load_all()
        best: tuple[int, Backend, TargetSpec] | None = None
        for backend, spec in self.declared_targets():
            if not probe(spec):
                continue
            if best is None or spec.priority > best[0]:
                best = (spec.priority, backend, spec)
        if best is None:
            return None
        _, backend, spec = best
        options, _ = bind_options(spec, {}, owner=backend.owner, passthrough=False)
        return ResolvedTarget(spec, options, backend.name, backend.distribution, backend.version)

    def find_upstream(self, kind: str) -> tuple[Backend, TargetSpec] | None:
        """The loaded spec that delegates TVM target kind ``kind`` upstream, if any.

        Backends whose metadata lists ``kind`` are loaded first: a TVM target that never
        passed through tilecore's normalizer (a ``Target`` object, or upstream's own
        normaliser for its own kinds) must still reach the backend that declares it.
        """
        for backend in self.metadata_names().get(kind, []):
            self._load(backend)
        for backend, spec in self.declared_targets():
            if spec.upstream is not None and spec.upstream.kind == kind:
                return backend, spec
        return None

    def backend_of(self, target: ResolvedTarget) -> Backend:
        for backend in self._backends:
            if backend.name == target.backend and backend.distribution == target.distribution:
                return backend
        raise TilecoreError(f"target {target} names backend {target.backend!r}, which is not registered")

    # -- hooks -----------------------------------------------------------------------------

    def _other_plugins(self, backend: Backend) -> list[object]:
        """Plugins to leave out when calling ``backend``'s hooks: every other backend, whether it
        declares targets or not.  Only plugins whose declared role is ``wrapper`` stay in every call."""
        return [b.plugin for b in self._backends if b is not backend and b.plugin is not None and b.role != hookspecs.WRAPPER]

    def call(self, target: ResolvedTarget, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on the backend owning ``target`` (and wrapper plugins).

        A result of the wrong type raises :class:`HookReturnError`; an exception
        that is not already a :class:`TilecoreError` is re-raised as
        :class:`BackendLoadError` naming the backend and hook, with the original
        chained.
        """
        backend = self.backend_of(target)
        try:
            result = self._caller(backend, hook)(target=target, **kwargs)
        except TilecoreError as err:
            raise with_owner(err, backend) from err.__cause__
        except Exception as err:
            raise BackendLoadError(
                f"{backend.label} raised in {hook} for target {target}: {type(err).__name__}: {err}",
                fix=f"report it to the authors of {backend.distribution}, or upgrade it (pip install -U {backend.distribution})",
            ) from err
        if result is not None:
            check_return(backend, hook, result)
        return result

    def _caller(self, backend: Backend, hook: str) -> Any:
        key = (id(backend), hook)
        caller = self._callers.get(key)
        if caller is None:
            caller = self._pm.subset_hook_caller(hook, self._other_plugins(backend))
            self._callers[key] = caller
        return caller

    def doctor_target(self, backend: Backend, spec: TargetSpec) -> str | None:
        """The backend's suggestion of explicit options for ``doctor`` (hook ``tilecore_doctor_target``)."""
        hook = "tilecore_doctor_target"
        try:
            result = self._caller(backend, hook)(spec=spec)
        except TilecoreError:
            raise
        except Exception as err:
            raise BackendLoadError(f"{backend.label} raised in {hook} for {spec.name!r}: {type(err).__name__}: {err}") from err
        if result is None:
            return None
        check_return(backend, hook, result)
        return str(result)

    def setup(self, target: ResolvedTarget) -> Toolchain | None:
        """Run the setup hook once per resolved target; failures are not cached."""
        cached = self._setups.get(target)
        if cached is not None:
            return cached
        with self._lock:
            cached = self._setups.get(target)
            if cached is None:
                cached = self.call(target, "tilecore_setup")
                if cached is not None:
                    self._setups[target] = cached
            return cached


def example_text(spec: TargetSpec) -> str:
    """``name:value`` with the first option's first listed value (or a placeholder)."""
    if not spec.options:
        return spec.name
    first = spec.options[0]
    return f"{spec.name}:{first.choices[0] if first.choices else '<' + first.name + '>'}"


def with_owner(err: TilecoreError, backend: Backend) -> TilecoreError:
    """``err`` itself when it names the backend's distribution, else the same error class with the
    "backend 'x' (dist version)" prefix the core owns (every user-facing error names it)."""
    if backend.distribution in str(err):
        return err
    try:
        renamed = type(err)(f"{backend.label}: {err}")
    except Exception:  # a subclass with another constructor: keep the original
        return err
    renamed.fix = err.fix
    return renamed


def check_return(backend: Backend, hook: str, value: object) -> None:
    """Raise :class:`HookReturnError` unless ``value`` satisfies ``hook``'s return contract."""
    contract = hookspecs.RETURNS.get(hook)
    if contract is None or contract.check(value):
        return
    shown = repr(value) if not isinstance(value, (list, tuple)) else f"{type(value).__name__} of {[type(v).__name__ for v in value][:5]}"
    if len(shown) > 200:
        shown = shown[:197] + "..."
    raise HookReturnError(
        f"{backend.label}: hook {hook} returned {type(value).__name__} ({shown}); expected {contract.expected}.",
        fix=f"this is a bug in {backend.distribution} {backend.version}: report it to its authors, or upgrade it",
    )


def probe(spec: TargetSpec) -> Availability:
    """Run a spec's availability probe; an exception means "not available"."""
    try:
        result = spec.probe()
    except Exception as err:  # probes must not raise; treat a crash as a reason
        return Availability.no(f"probe raised {type(err).__name__}: {err}")
    if not isinstance(result, Availability):
        return Availability.no(f"probe returned {result!r} instead of tilecore.Availability")
    return result
