"""The backend registry: loading, target index, resolution and hook dispatch.

Loading is lazy and failure-isolated (the JAX ``xla_bridge`` model): a backend
is imported the first time one of its targets is named (or when diagnostics
or ``target="auto"`` need every backend).  Anything that goes wrong while
importing it, checking its API version or collecting its targets is recorded
on its :class:`Backend` record and raised only when the user names one of its
targets.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from typing import Any

import pluggy

from tilecore import hookspecs
from tilecore._version import API_VERSION, __version__
from tilecore.discovery import DiscoveredBackend, PluginPolicy, discover
from tilecore.errors import (
    AmbiguousTargetError,
    BackendLoadError,
    IncompatibleBackendError,
    PluginValidationError,
    TilecoreError,
    UnknownTargetError,
    choices_text,
)
from tilecore.kernel import Toolchain
from tilecore.targets import (
    Availability,
    ResolvedTarget,
    TargetSpec,
    bind_options,
    raw_options,
    target_kind,
)

IN_PROCESS = "<in-process>"


class State(str, Enum):
    DISCOVERED = "not loaded"
    LOADED = "loaded"
    FAILED = "failed"
    BLOCKED = "blocked"


@dataclass(eq=False)
class Backend:
    """One backend: an entry point or an object given to :func:`tilecore.register`."""

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


def parse_api_version(text: object, *, who: str) -> tuple[int, int]:
    try:
        major, minor = (int(p) for p in str(text).split("."))
    except ValueError:
        raise PluginValidationError(
            f"{who} declares tilecore_api_version={text!r}; it must be 'MAJOR.MINOR', e.g. "
            f"'{API_VERSION[0]}.{API_VERSION[1]}'."
        ) from None
    return major, minor


def check_api_version(plugin: object, *, who: str) -> str:
    declared = getattr(plugin, "tilecore_api_version", None)
    if declared is None:
        raise PluginValidationError(
            f"{who} does not declare tilecore_api_version. Add "
            f"tilecore_api_version = \"{API_VERSION[0]}.{API_VERSION[1]}\" next to its hook implementations."
        )
    major, minor = parse_api_version(declared, who=who)
    core = f"{API_VERSION[0]}.{API_VERSION[1]}"
    if major != API_VERSION[0]:
        raise IncompatibleBackendError(
            f"{who} implements tilecore plugin API {major}.{minor}, but this tilecore {__version__} implements "
            f"plugin API {core}. Install a version of the backend written for API {API_VERSION[0]}.x, or a tilecore "
            f"that implements API {major}.x."
        )
    if minor > API_VERSION[1]:
        raise IncompatibleBackendError(
            f"{who} needs tilecore plugin API {major}.{minor}, newer than API {core} of this tilecore {__version__}. "
            f"Upgrade tilecore (pip install -U tilecore)."
        )
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=1)
def _known_distributions() -> dict[str, str]:
    return json.loads(resources.files("tilecore").joinpath("known_targets.json").read_text())


class Registry:
    """All backends of one process.  Thread-safe; one instance lives in :mod:`tilecore`.

    ``builtin_kinds`` names the targets the host compiler (tilelang) handles by
    itself; naming one of them never imports every backend, and an unknown one
    is left to tilelang rather than reported as unknown.
    """

    def __init__(self, policy: PluginPolicy | None = None, builtin_kinds: Callable[[], Iterable[str]] = tuple) -> None:
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
                backend = Backend(found.name, found.distribution, found.version, found.value, discovered=found)
                blocked = self.policy.decide(found.name)
                if blocked is not None and found.distribution in self.policy.allowed:
                    blocked = None
                if blocked is None and found.distribution in self.policy.blocked:
                    blocked = f"blocked by TILECORE_PLUGINS=no:{found.distribution}"
                if blocked is not None:
                    backend.state, backend.reason = State.BLOCKED, blocked
                self._backends.append(backend)
            self._discovered = True

    # -- loading ---------------------------------------------------------------------------

    def load_all(self) -> None:
        """Import every allowed backend (diagnostics, ``target="auto"``)."""
        for backend in self.backends():
            if backend.state is State.DISCOVERED:
                self._load(backend)

    def _load(self, backend: Backend) -> None:
        with self._lock:
            if backend.state is not State.DISCOVERED:
                return
            assert backend.discovered is not None
            try:
                plugin = backend.discovered.entry_point.load()
            except BaseException as err:
                if isinstance(err, KeyboardInterrupt):
                    raise
                self._fail(backend, err)
                return
            try:
                self._adopt(backend, plugin)
            except Exception as err:
                self._fail(backend, err)

    def _fail(self, backend: Backend, err: BaseException) -> None:
        backend.state, backend.error = State.FAILED, err
        if backend.plugin is not None and self._pm.is_registered(backend.plugin):
            self._pm.unregister(backend.plugin)
        backend.plugin = None
        self._forget(backend)

    def _adopt(self, backend: Backend, plugin: object) -> None:
        """Validate and register ``plugin`` as ``backend``; all-or-nothing."""
        backend.api_version = check_api_version(plugin, who=backend.label)
        try:
            self._pm.register(plugin, name=f"{backend.name}@{backend.distribution}")
        except pluggy.PluginValidationError as err:
            raise PluginValidationError(f"{backend.label}: {err}") from err
        backend.plugin = plugin
        try:
            try:
                self._pm.check_pending()
            except pluggy.PluginValidationError as err:
                raise PluginValidationError(
                    f"{backend.label} implements a hook tilecore does not define: {err}. "
                    f"Valid hooks: {', '.join(sorted(h for h in dir(hookspecs) if h.startswith('tilecore_')))}."
                ) from err
            declared = self._pm.subset_hook_caller("tilecore_declare_targets", self._other_plugins(backend))()
            targets = [spec for group in declared for spec in (group or ())]
            for spec in targets:
                if not isinstance(spec, TargetSpec):
                    raise PluginValidationError(
                        f"{backend.label}: tilecore_declare_targets returned {spec!r}; expected tilecore.TargetSpec objects"
                    )
        except Exception:
            self._pm.unregister(plugin)
            backend.plugin = None
            raise
        backend.targets = tuple(targets)
        backend.state = State.LOADED
        for spec in backend.targets:
            for name in spec.names:
                self._index.setdefault(name, []).append((backend, spec))
        self._callers.clear()

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
            backend = Backend(name, IN_PROCESS, version, repr(plugin))
            self._adopt(backend, plugin)
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
        self._ensure_discovered()
        hits = self._index.get(kind)
        if hits:
            return hits
        # Lazy path: import the backend(s) whose entry-point name is the kind, or whose
        # distribution known_targets.json names for it (an alias such as "rocm", which is
        # also a TVM kind), first; then, for names that are not the host compiler's own,
        # everything else (the name may be an alias).
        known = _known_distributions().get(kind)
        for backend in self._backends:
            if (backend.name == kind or backend.distribution == known) and backend.state is State.DISCOVERED:
                self._load(backend)
        hits = self._index.get(kind)
        if not hits and kind not in set(self._builtin_kinds()):
            self.load_all()
            hits = self._index.get(kind)
        return hits or []

    def owns(self, target: object) -> bool:
        """Whether a string/dict target names a tilecore-declared target (may import backends)."""
        kind = target_kind(target)
        return kind is not None and bool(self._lookup(kind))

    def resolve(self, target: str | Mapping[str, Any] | ResolvedTarget) -> ResolvedTarget | None:
        """Resolve user input to a declared target.

        Returns ``None`` for a kind that no backend declares but the host
        compiler knows (tilelang handles it).  Raises a :class:`TilecoreError`
        for anything else that cannot be resolved.
        """
        if isinstance(target, ResolvedTarget):
            return target
        kind = target_kind(target)
        if kind is None:
            return None
        with self._lock:
            hits = self._lookup(kind)
        if not hits:
            self._raise_if_backend_unusable(kind)
            if kind in set(self._builtin_kinds()):
                return None
            raise UnknownTargetError(self._unknown_target_message(kind))
        if len(hits) > 1:
            owners = "; ".join(f"{b.label} as {s.name!r}" for b, s in hits)
            names = " or ".join(f"TILECORE_PLUGINS=no:{b.name if b.name != hits[0][0].name else b.distribution}" for b, _ in hits)
            raise AmbiguousTargetError(
                f"target {kind!r} is claimed by more than one backend: {owners}. "
                f"Uninstall one, or choose with {names}."
            )
        backend, spec = hits[0]
        options, _extra = bind_options(spec, raw_options(target), owner=backend.owner, passthrough=spec.upstream is not None)
        return ResolvedTarget(spec, options, backend.name, backend.distribution, backend.version)

    def upstream_extra(self, target: str | Mapping[str, Any]) -> dict[str, Any]:
        """Keys of a target that the delegating spec does not declare: passed to TVM as attributes
        (TVM refuses unknown ones), never dropped."""
        resolved = self.resolve(target)
        if resolved is None:
            return {}
        return bind_options(resolved.spec, raw_options(target), owner=resolved.owner, passthrough=True)[1]

    def _raise_if_backend_unusable(self, kind: str) -> None:
        for backend in self._backends:
            if backend.name != kind:
                continue
            if backend.state is State.FAILED:
                raise BackendLoadError(
                    f"target {kind!r} is provided by {backend.label}, which failed to load: {backend.error_text()}. "
                    f"Fix or reinstall it (pip install --force-reinstall {backend.distribution}), or block it with "
                    f"TILECORE_PLUGINS=no:{backend.name}. Run `tilecore list` for every backend's status."
                ) from backend.error
            if backend.state is State.BLOCKED:
                raise UnknownTargetError(
                    f"target {kind!r} is provided by {backend.label}, which is not loaded: {backend.reason}."
                )

    def _unknown_target_message(self, kind: str) -> str:
        installed = [f"{s.name} ({b.owner})" for b, s in self.declared_targets()]
        parts = [f"Unknown target {kind!r}."]
        parts.append(f"Installed tilecore targets: {choices_text(installed)}.")
        builtin = sorted(set(self._builtin_kinds()))
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
        """The available declared target of highest priority, with default options."""
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

        A backend whose entry-point name is ``kind`` is loaded first: a TVM target that
        never passed through tilecore's normalizer (a ``Target`` object, or upstream's own
        normaliser for its own kinds) must still reach the backend that declares it.
        """
        self._ensure_discovered()
        for backend in self._backends:
            if backend.name == kind and backend.state is State.DISCOVERED:
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
        """Plugins to leave out when calling ``backend``'s hooks: the other backends that declare
        targets.  Plugins declaring none (tracing, logging wrappers) stay in every call."""
        return [b.plugin for b in self._backends if b is not backend and b.plugin is not None and b.targets]

    def call(self, target: ResolvedTarget, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` on the backend owning ``target`` (and target-less plugins).

        An exception that is not already a :class:`TilecoreError` is re-raised
        as :class:`BackendLoadError` naming the backend and hook, with the
        original chained.
        """
        backend = self.backend_of(target)
        key = (id(backend), hook)
        caller = self._callers.get(key)
        if caller is None:
            caller = self._pm.subset_hook_caller(hook, self._other_plugins(backend))
            self._callers[key] = caller
        try:
            return caller(target=target, **kwargs)
        except TilecoreError:
            raise
        except Exception as err:
            raise BackendLoadError(
                f"{backend.label} raised in {hook} for target {target}: {type(err).__name__}: {err}"
            ) from err

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


def probe(spec: TargetSpec) -> Availability:
    """Run a spec's availability probe; an exception means "not available"."""
    try:
        result = spec.probe()
    except Exception as err:  # probes must not raise; treat a crash as a reason
        return Availability.no(f"probe raised {type(err).__name__}: {err}")
    if not isinstance(result, Availability):
        return Availability.no(f"probe returned {result!r} instead of tilecore.Availability")
    return result
