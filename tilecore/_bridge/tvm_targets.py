"""Declared targets <-> TVM targets: the normalizer and detector tilelang's registries call.

A backend-owned target becomes ``ext_dev`` keyed ``["tilecore", name]`` with the
backend and every option in ``libs`` (so they are part of ``str(target)`` and of
tilelang's cache key); a delegated target becomes the upstream kind its
:class:`~tilecore.targets.Upstream` names.  :func:`resolve_tvm` is the inverse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tilecore.errors import TargetOptionError, TilecoreError

if TYPE_CHECKING:
    from tvm.target import Target

    from tilecore._registry import Registry
    from tilecore.targets import ResolvedTarget

#: tilecore's one name in tilelang: the key that marks a TVM ``ext_dev`` target as owned by a tilecore
#: backend, the name its normalizer, detector, profiler hooks and cache-key salt are registered under,
#: and the name of its backend module and execution backend.
NAME = "tilecore"
NORMALIZER_TABLE = "tilelang.backend.target:_TARGET_NORMALIZERS"


def tvm_config(target: ResolvedTarget, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The TVM target config for a resolved target (``extra``: TVM attributes the user gave)."""
    if target.spec.upstream is not None:
        config = target.spec.upstream.tvm_config(target.options)
        for key, value in (extra or {}).items():
            if key in config and str(config[key]) != str(value):
                raise TargetOptionError(
                    f"TVM attribute {key}={value!r} contradicts {key}={config[key]!r} derived from the target's options; give one of them.",
                    owner=target.error_owner,
                )
            config[key] = value
        return config
    first = next(iter(target.options.values()), target.name)
    return {
        "kind": "ext_dev",
        "keys": [NAME, target.name],
        "model": first,
        # libs holds free strings; they land in str(target) and so in tilelang's cache key.
        "libs": [f"tilecore.backend={target.backend}", f"tilecore.dist={target.distribution}=={target.version}"]
        + [f"{k}={v}" for k, v in target.options.items()],
    }


def resolve_tvm(registry: Registry, tvm_target: Target) -> ResolvedTarget | None:
    """The declared target behind a TVM target, or ``None`` if tilecore does not own it."""
    kind = tvm_target.kind.name
    if kind == "ext_dev":
        keys = list(tvm_target.keys)
        if NAME not in keys or len(keys) < 2:
            return None
        name = keys[keys.index(NAME) + 1]
        options = {}
        for lib in tvm_target.attrs.get("libs", ()):
            key, _, value = str(lib).partition("=")
            if not key.startswith("tilecore."):
                options[key] = value
        return registry.resolve({"kind": name, **options})
    owner = registry.find_upstream(kind)
    if owner is None:
        return None
    _backend, spec = owner
    raw = {opt.name: str(tvm_target.attrs[opt.name]) for opt in spec.options if opt.name in tvm_target.attrs}
    if spec.upstream is not None and spec.upstream.options_from_attrs is not None:
        raw.update(spec.upstream.options_from_attrs(tvm_target.attrs))
    return registry.resolve({"kind": spec.name, **raw})


def owned_target(registry: Registry, tvm_target: Any) -> ResolvedTarget | None:
    """The tilecore target of a TVM target, or ``None`` (a target only tilelang knows, or one that does not resolve)."""
    try:
        return resolve_tvm(registry, tvm_target)
    except TilecoreError:
        return None


def own_target(registry: Registry, tvm_target: Any) -> ResolvedTarget:
    """The tilecore target of a TVM target the ``tilecore`` backend module was handed (it must be one)."""
    resolved = resolve_tvm(registry, tvm_target)
    if resolved is None:
        raise TilecoreError(f"tilecore does not own target {tvm_target}")
    return resolved


def normalizer(registry: Registry) -> Callable[[object], Target | None]:
    """tilelang target normalizer: declared target names and dicts -> TVM targets."""

    def normalize(target: object) -> Target | None:
        if not isinstance(target, (str, Mapping)) or target == "auto":
            return None
        if isinstance(target, str) and len(target.split()) > 1:
            return None  # TVM's own string syntax ("<kind> -attr=value"): tilelang parses it
        resolved, extra = registry.resolve_with_extra(target)
        if resolved is None:
            return None
        from tvm.target import Target

        # Setup is not run here: normalising also serves source-only uses (tilelang.lower) that
        # need no toolchain.  It runs before compiling: in the cache key (delegated and owned
        # targets) and in the owned-target pipeline.
        config = tvm_config(resolved, extra)
        try:
            return Target(config)
        except Exception as err:  # TVM's message names neither the target nor the backend
            raise TargetOptionError(f"target {target!r} ({resolved.owner}): TVM refused the target config {config}: {err}") from err

    return normalize


def detector(registry: Registry) -> Callable[[], Target | None]:
    """tilelang target detector for ``target="auto"``: the best available declared target."""

    def detect() -> Target | None:
        resolved = registry.select_auto()
        if resolved is None:
            return None
        from tvm.target import Target

        return Target(tvm_config(resolved))

    return detect


def register_normalizer(registry: Registry, _original: object = None) -> None:
    """Register tilecore's normalizer *first*: a declared target written as a dict
    (``{"kind": k}``) must get its backend's checks exactly as the string ``"k"`` does,
    instead of being taken by upstream's normalizer for the same kind (which fills
    defaults silently).  The normalizer returns ``None`` for anything tilecore does not
    declare, so upstream's own kinds are unaffected."""
    from tilelang.backend import register_target_normalizer

    from tilecore._bridge import gate

    register_target_normalizer(NAME, normalizer(registry), override=True)
    table = gate.resolve(NORMALIZER_TABLE)  # the seam's recorded table (seams.py), gated like the rest
    ours = table.pop(NAME)
    rest = dict(table)
    table.clear()
    table[NAME] = ours
    table.update(rest)


def register_normalizer_public(registry: Registry) -> Callable[[], None]:
    """The public path (tilelang with ``unregister_target_normalizer`` and ``first=``,
    docs/upstream/entry-points.md): first, for the reason :func:`register_normalizer` gives."""
    from tilelang.backend import register_target_normalizer, unregister_target_normalizer

    register_target_normalizer(NAME, normalizer(registry), override=True, first=True)
    return lambda: unregister_target_normalizer(NAME)


def register_detector(registry: Registry, _original: object = None) -> None:
    from tilelang.backend import register_target_detector

    register_target_detector(NAME, detector(registry), override=True)
