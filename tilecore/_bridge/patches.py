"""Applying and reverting :data:`~tilecore._bridge.seams.SEAMS`: ``install`` / ``uninstall``.

``install`` runs the gate, then applies every row with a wrapper, recording how
to undo it; a failure half-way reverts what was applied.  ``uninstall`` reverts
in reverse order, restoring the original objects themselves (the same function,
staticmethod or dict entry), so tilelang is left exactly as it was.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilecore._bridge import gate
from tilecore._bridge.seams import SEAMS, Seam
from tilecore._bridge.tvm_targets import NAME
from tilecore.errors import TilecoreError

if TYPE_CHECKING:
    from tilecore._registry import Registry

_MISSING = object()
_lock = threading.RLock()
_installed: Registry | None = None
_undo: list[Callable[[], None]] = []


def wrapper_of(seam: Seam, public: bool = False) -> Callable[..., Any]:
    """The wrapper factory a seam names (``"module:function"`` in :mod:`tilecore._bridge`), or its public one."""
    path = seam.public_wrapper if public else seam.wrapper
    assert path is not None
    module, _, name = path.partition(":")
    factory: Callable[..., Any] = getattr(importlib.import_module(f"tilecore._bridge.{module}"), name)
    return factory


def _apply(seam: Seam, registry: Registry) -> Callable[[], None]:
    if gate.retired(seam):  # register through tilelang's public API, or nothing at all
        if seam.kind == "register" and seam.public_wrapper is None:
            # The wrapper calls tilelang's public registration function; the row's public API is its unregister.
            wrapper_of(seam)(registry)
            return lambda: gate.resolve(seam.retired_by)(NAME)
        if seam.public_wrapper is None:
            return lambda: None
        undo: Callable[[], None] = wrapper_of(seam, public=True)(registry)
        return undo
    owner = gate.resolve(seam.owner)
    factory = wrapper_of(seam)
    if seam.kind == "attribute":
        # The raw class-dict entry, so a staticmethod comes back as the same staticmethod.
        raw = vars(owner).get(seam.attribute, _MISSING) if isinstance(owner, type) else getattr(owner, seam.attribute, _MISSING)
        setattr(owner, seam.attribute, factory(registry, getattr(owner, seam.attribute, None)))

        def undo_attribute() -> None:
            if raw is _MISSING:
                delattr(owner, seam.attribute)
            else:
                setattr(owner, seam.attribute, raw)

        return undo_attribute
    if seam.kind == "item":
        previous = owner.get(seam.attribute, _MISSING)
        owner[seam.attribute] = factory(registry, None if previous is _MISSING else previous)

        def undo_item() -> None:
            if previous is _MISSING:
                owner.pop(seam.attribute, None)
            else:
                owner[seam.attribute] = previous

        return undo_item
    if seam.kind == "register":
        tables = [gate.resolve(table) for table in seam.tables]
        snapshots = [{key: list(value) if isinstance(value, list) else value for key, value in table.items()} for table in tables]
        factory(registry)

        def undo_register() -> None:
            for table, snapshot in zip(tables, snapshots, strict=True):
                for key in [k for k in table if k not in snapshot]:
                    del table[key]
                for key, value in snapshot.items():
                    if isinstance(value, list) and isinstance(table.get(key), list):
                        table[key][:] = value  # keep the list object tilelang holds
                    else:
                        table[key] = value

        return undo_register
    raise ValueError(f"seam {seam.name} of kind {seam.kind!r} cannot be applied")


def installed() -> Registry | None:
    """The registry the bridge currently connects to tilelang, or ``None``."""
    return _installed


def install(registry: Registry) -> None:
    """Connect ``registry`` to tilelang.  Idempotent; refuses unknown tilelang versions and missing seams."""
    global _installed
    with _lock:
        if _installed is not None:
            if _installed is not registry:
                raise TilecoreError(
                    "tilecore is already bridged to tilelang with another registry; call tilecore._bridge.uninstall() first"
                )
            return
        gate.check()
        try:
            for seam in SEAMS:
                if seam.patched:
                    _undo.append(_apply(seam, registry))
        except BaseException:
            _revert()
            raise
        registry.add_load_check(gate.check_loading_backend)
        _installed = registry


def _revert() -> None:
    while _undo:
        _undo.pop()()


def uninstall() -> None:
    """Revert every applied seam; tilelang's objects are then the originals again.  Idempotent."""
    global _installed
    with _lock:
        _revert()
        _installed = None
