"""Resolution: from what a user writes (``"acme:x2"``, a dict, ``"auto"``) to a :class:`ResolvedTarget`.

Which backend owns a name is decided from metadata first (:meth:`Resolver._lookup`), so the
answer never depends on load order; only the owner is imported.  See "Resolution rule" in
docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilecore._registry import messages
from tilecore._registry.discovery import Backend, State
from tilecore._registry.loading import Loader, import_timeout
from tilecore._registry.options import bind_options, raw_options, target_kind
from tilecore.errors import MalformedTargetError
from tilecore.targets import Availability, ResolvedTarget, TargetSpec, is_target_name

Hit = tuple[Backend, TargetSpec]


def probe(spec: TargetSpec) -> Availability:
    """Run a spec's availability probe; an exception means "not available"."""
    try:
        result = spec.probe()
    except Exception as err:  # probes must not raise; treat a crash as a reason
        return Availability.no(f"probe raised {type(err).__name__}: {err}")
    if not isinstance(result, Availability):
        return Availability.no(f"probe returned {result!r} instead of tilecore.Availability")
    return result


def is_host_syntax(target: object, kind: str) -> bool:
    """A string in the host compiler's own syntax (``"<kind> -attr=value"``, tags ``"vendor/model"``)."""
    return isinstance(target, str) and (len(target.split()) > 1 or "/" in kind)


class Resolver(Loader):
    """Looks names up in a :class:`BackendTable`, loading only the backends that may declare them.

    A part of :class:`~tilecore._registry.registry.Registry`.
    """

    def _lookup(self, kind: str) -> list[Hit]:
        """Who declares ``kind``.  Resolution rule (the same in a fresh process and after ``load_all``):

        1. Metadata first: allowed backends whose distribution lists ``kind``.  Two of them is an
           :class:`AmbiguousTargetError` before anything is imported; one is imported, under the import deadline, and must declare it.
        2. A kind no metadata lists and the host compiler knows: not ours (``[]``), nothing imported.
        3. Otherwise only *legacy* backends (no ``tilecore.targets`` metadata) may declare it: those
           are imported, never a backend whose metadata is complete.
        """
        claimants = self.metadata_names().get(kind, [])
        if len(claimants) > 1:
            raise messages.ambiguous(kind, [(b, None) for b in claimants])
        if claimants:
            backend = claimants[0]
            self._load(backend, timeout=import_timeout())
            if backend.state is State.FAILED:
                raise messages.failed_backend(kind, backend) from backend.error
            hits = [(backend, spec) for spec in backend.targets if kind in spec.names]
            if hits or backend.complete:
                return hits
        if kind in self.builtin_kinds():
            return []
        declared = self.declaring(kind)
        if declared:
            return declared
        deadline = import_timeout()
        for backend in self.backends():
            if not backend.complete and backend.state is State.DISCOVERED:
                self._load(backend, timeout=deadline)
        return self.declaring(kind)

    def resolve(self, target: str | Mapping[str, Any] | ResolvedTarget) -> ResolvedTarget | None:
        """Resolve user input to a declared target.

        Returns ``None`` for a kind that no backend declares but the host
        compiler knows (tilelang handles it), and for strings in the host
        compiler's own syntax (``"<kind> -attr=value"``, tags ``"vendor/model"``).
        Raises a :class:`TilecoreError` for anything else that cannot be
        resolved, malformed input included.
        """
        return self.resolve_with_extra(target)[0]

    def resolve_with_extra(self, target: str | Mapping[str, Any] | ResolvedTarget) -> tuple[ResolvedTarget | None, dict[str, Any]]:
        """:meth:`resolve`, and the keys of the target that its delegating spec does not declare: passed
        to TVM as attributes (TVM refuses unknown ones), never dropped."""
        if isinstance(target, ResolvedTarget):
            return target, {}
        kind = target_kind(target)
        if kind is None or is_host_syntax(target, kind):
            return None, {}
        if not is_target_name(kind):
            raise messages.malformed_name(target, kind, self.known_names())
        with self.lock:
            hits = self._lookup(kind)
            if not hits:
                self._raise_if_backend_unusable(kind)
                if kind in self.builtin_kinds():
                    return None, {}
                raise messages.unknown_target(self, kind)
        if len(hits) > 1:
            raise messages.ambiguous(kind, [(b, s.name) for b, s in hits])
        backend, spec = hits[0]
        try:
            raw = raw_options(target)
        except MalformedTargetError as err:
            raise messages.malformed_options(err, spec, backend) from None
        passthrough = spec.upstream is not None
        options, extra = bind_options(spec, self._with_upstream_attrs(spec, raw, backend), owner=backend.owner, passthrough=passthrough)
        return ResolvedTarget(spec, options, backend.name, backend.distribution, backend.version), extra

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
            raise messages.unreadable_attrs(spec, backend, attrs, err) from err
        merged = dict(raw)
        positional = spec.options[0].name if spec.options else None
        for name, value in mapped.items():
            given = merged.get(name, merged.get("") if name == positional else None)
            if given is not None and str(given).strip() != str(value):
                raise messages.contradicting_attrs(spec, backend, name, given, value, attrs)
            if given is None:
                merged[name] = value
        return merged

    def _raise_if_backend_unusable(self, kind: str) -> None:
        for backend in self.entries:
            if kind not in backend.claims and backend.name != kind:
                continue
            if backend.state is State.FAILED:
                raise messages.failed_backend(kind, backend) from backend.error
            if backend.state is State.BLOCKED:
                raise messages.blocked_backend(kind, backend)
            if backend.state is State.LOADED and backend.complete and kind in backend.claims:
                raise messages.listed_not_declared(kind, backend)

    def select_auto(self) -> ResolvedTarget | None:
        """The available declared target of highest priority, with default options.

        Imports every allowed backend, each under the import deadline (see :meth:`Loader.load_all`).
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

    def find_upstream(self, kind: str) -> Hit | None:
        """The loaded spec that delegates TVM target kind ``kind`` upstream, if any.

        Backends whose metadata lists ``kind`` are loaded first: a TVM target that never
        passed through tilecore's normalizer (a ``Target`` object, or upstream's own
        normaliser for its own kinds) must still reach the backend that declares it.
        """
        for backend in self.metadata_names().get(kind, []):
            self._load(backend, timeout=import_timeout())
        for backend, spec in self.declared_targets():
            if spec.upstream is not None and spec.upstream.kind == kind:
                return backend, spec
        return None
