"""Loading a backend: import under a deadline, API-version and role checks, target validation.

Anything that goes wrong is recorded on the backend's :class:`~tilecore._registry.discovery.Backend`
record (state ``failed``) and raised only when the user names one of its targets.  Adoption is
all-or-nothing: a backend that fails a check is unregistered again and declares no target.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pluggy

from tilecore import hookspecs
from tilecore._registry import compat, messages
from tilecore._registry.discovery import IN_PROCESS, Backend, State
from tilecore._registry.dispatch import check_return
from tilecore._registry.table import BackendTable, LoadCheck
from tilecore._version import API_VERSION
from tilecore.errors import PluginValidationError
from tilecore.kit.tools import run_tool
from tilecore.targets import TargetSpec

#: Seconds a backend's import may take (``TILECORE_IMPORT_TIMEOUT``): one that hangs is recorded as
#: failed, naming the file and line it hangs at, instead of hanging ``tilelang.compile`` in silence.
DEFAULT_IMPORT_TIMEOUT = 60.0


def check_api_version(plugin: object, backend: Backend) -> str:
    declared = getattr(plugin, "tilecore_api_version", None)
    if declared is None:
        raise messages.no_api_version(backend)
    try:
        major, minor = (int(p) for p in str(declared).split("."))
    except ValueError:
        raise messages.bad_api_version(backend, declared) from None
    if major != API_VERSION[0]:
        raise messages.other_api_major(backend, major, minor)
    if minor > API_VERSION[1]:
        raise messages.newer_api_minor(backend, major, minor)
    return f"{major}.{minor}"


def import_timeout() -> float:
    text = os.environ.get("TILECORE_IMPORT_TIMEOUT", "")
    try:
        return float(text) if text else DEFAULT_IMPORT_TIMEOUT
    except ValueError:
        return DEFAULT_IMPORT_TIMEOUT


def _where(thread: threading.Thread) -> str:
    """``file:line`` of the innermost frame of ``thread`` (where an import hangs), or ``""``."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return ""
    last = traceback.extract_stack(frame)[-1]
    return f"{last.filename}:{last.lineno}"


def import_plugin(backend: Backend, timeout: float | None) -> object:
    """Load the entry point, in this thread, or under a deadline in a helper thread."""
    entry_point = backend.entry_point
    assert entry_point is not None
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
        raise messages.import_hangs(backend, timeout, _where(worker))
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def probe_import(backend: Backend, timeout: float) -> BaseException | None:
    """Import ``backend``'s entry-point module in a fresh interpreter: the error to record if that
    crashed or hung, else ``None`` (an ordinary exception is left to the in-process import, which
    records it with its traceback)."""
    if backend.entry_point is None:  # registered in-process: nothing to import
        return None
    module = backend.value.partition(":")[0]
    done = run_tool([sys.executable, "-c", f"import importlib; importlib.import_module({module!r})"], timeout=timeout)
    if done.timed_out:
        return messages.import_hangs(backend, timeout)
    if done.returncode is not None and done.returncode < 0:
        return messages.import_crashes(backend, f"crashed the interpreter ({done.status.removeprefix('signal ')})")
    return None  # it ran, or no subprocess here: left to the in-process import under its deadline


class Loader(BackendTable):
    """Imports, checks and adopts the backends of the table into its plugin manager.

    A part of :class:`~tilecore._registry.registry.Registry`.
    """

    def add_load_check(self, check: LoadCheck) -> None:
        """Run ``check(backend, plugin)`` on every backend as it loads (after its API-version check); it raises to refuse one.

        The bridge adds the check of a backend's declared tilelang seams this way, so the
        registry never touches tilelang.
        """
        if check not in self._checks:
            self._checks.append(check)

    def load_all(self, timeout: float | None = None) -> None:
        """Import every allowed backend (``target="auto"``, names no metadata lists), each under the
        deadline (default ``TILECORE_IMPORT_TIMEOUT`` or 60 s): one that does not finish is recorded
        as failed, naming the backend, instead of hanging the caller.

        The user named none of them (``target="auto"``, or a name no metadata lists), so a backend
        whose import would kill the interpreter (a native crash) must not take this process down:
        each is first imported in a fresh interpreter, in parallel, and only the ones that survive
        are imported here.  (A backend the user names is imported directly: its crash is the answer.)
        """
        deadline = import_timeout() if timeout is None else timeout
        pending = [backend for backend in self.backends() if backend.state is State.DISCOVERED]
        with ThreadPoolExecutor(max_workers=max(1, min(len(pending), 4))) as pool:
            verdicts = list(pool.map(lambda backend: probe_import(backend, deadline), pending))
        for backend, verdict in zip(pending, verdicts, strict=True):
            if verdict is not None:
                with self.lock:
                    if backend.state is State.DISCOVERED:
                        self._fail(backend, verdict)
            else:
                self._load(backend, timeout=deadline)

    def _load(self, backend: Backend, timeout: float | None = None) -> None:
        with self.lock:
            if backend.state is not State.DISCOVERED:
                return
            twin = next((b for b in self.entries if b is not backend and b.value == backend.value and b.state is State.LOADED), None)
            if twin is not None:
                self._fail(backend, messages.same_entry_point(backend, twin))
                return
            # The tested tilelang range is metadata: refuse before importing a backend built for another tilelang.
            problem = compat.backend_range_problem(backend.distribution, backend.version)
            if problem is not None and compat.check_mode() == "strict":
                self._fail(backend, messages.outside_range(backend, problem))
                return
            try:
                plugin = import_plugin(backend, timeout)
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
        """Record ``err`` on ``backend`` and unregister its plugin and targets."""
        backend.state, backend.error = State.FAILED, err
        if backend.plugin is not None and self._pm.is_registered(backend.plugin):
            self._pm.unregister(backend.plugin)
        backend.plugin = None
        backend.targets = ()
        self.callers.clear()  # the hook callers that left it out (or in) are stale

    def _adopt(self, backend: Backend, plugin: object) -> None:
        """Validate and register ``plugin`` as ``backend``; all-or-nothing."""
        backend.api_version = check_api_version(plugin, backend)
        for check in self._checks:
            check(backend, plugin)
        problem = compat.backend_range_problem(backend.distribution, backend.version)
        if problem is not None and compat.check_mode() == "seams":
            compat.warn_once(f"{backend.label}: {problem}; loaded because {compat.CHECK_VARIABLE}=seams and its declared seams check out.")
        role = getattr(plugin, hookspecs.ROLE_ATTRIBUTE, hookspecs.BACKEND)
        if role not in hookspecs.ROLES:
            raise messages.bad_role(backend, role)
        try:
            self._pm.register(plugin, name=f"{backend.name}@{backend.distribution}")
        except (pluggy.PluginValidationError, ValueError) as err:
            raise PluginValidationError(str(err), owner=backend.error_owner) from err
        backend.plugin = plugin
        try:
            try:
                self._pm.check_pending()
            except pluggy.PluginValidationError as err:
                raise messages.unknown_hook(backend, err) from err
            targets = self._declared_targets(backend, plugin, role)
            self._validate_names(backend, targets)
        except Exception:
            self._pm.unregister(plugin)
            backend.plugin = None
            raise
        backend.role = role
        backend.targets = targets
        backend.state = State.LOADED
        self.callers.clear()

    def _declared_targets(self, backend: Backend, plugin: object, role: str) -> tuple[TargetSpec, ...]:
        hook = "tilecore_declare_targets"
        impl = next((i for i in getattr(self._pm.hook, hook).get_hookimpls() if i.plugin is plugin), None)
        if role == hookspecs.WRAPPER:
            if impl is not None:
                raise messages.wrapper_declares(backend, hook)
            return ()
        if impl is None:
            raise messages.declares_nothing(backend, hook)
        result = impl.function()
        check_return(backend, hook, result)
        return tuple(result)

    def _validate_names(self, backend: Backend, targets: tuple[TargetSpec, ...]) -> None:
        """Load-time rules that keep resolution independent of load order (docs/architecture.md)."""
        seen: dict[str, str] = {}
        for spec in targets:
            for name in spec.names:
                if name in seen:
                    raise messages.name_twice(backend, name, seen[name], spec.name)
                seen[name] = spec.name
        in_process = backend.distribution == IN_PROCESS
        builtin = self.builtin_kinds()
        claims = set(backend.claims)
        for spec in targets:
            for name in spec.names:
                if name in builtin:
                    if not spec.replaces_builtin:
                        raise messages.builtin_without_opt_in(backend, name, spec)
                    if not in_process and not (backend.complete and name in claims):
                        raise messages.builtin_not_listed(backend, name)
                if in_process or name in claims:
                    continue
                if backend.complete:
                    raise messages.not_in_metadata(backend, name, claims)
                others = [b for b in self.entries if b is not backend and b.state is not State.BLOCKED and name in b.claims]
                if others:
                    raise messages.listed_by_other(backend, name, others[0])

    def register(self, plugin: object, name: str | None = None) -> Backend:
        """Register an in-process backend (notebooks, tests).  Errors raise at once."""
        self.ensure_discovered()
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        version = str(getattr(plugin, "__version__", "0"))
        with self.lock:
            if any(b.name == name and b.distribution == IN_PROCESS for b in self.entries):
                raise PluginValidationError(f"an in-process backend named {name!r} is already registered")
            backend = Backend(name, IN_PROCESS, version, repr(plugin), complete=True)
            self._adopt(backend, plugin)
            backend.claims = tuple(sorted(backend.declared_names()))
            self.entries.append(backend)
            return backend
