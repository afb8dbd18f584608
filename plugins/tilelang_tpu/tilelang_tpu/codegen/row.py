"""One row of the construct table (:mod:`tilelang_tpu.codegen.table`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext

__all__ = ["REFUSED", "SUPPORTED", "Construct"]

SUPPORTED = "supported"
REFUSED = "refused"


@dataclass(frozen=True)
class Construct:
    """One construct: what users write, what the tpu target emits for it, and where."""

    tilelang: str  #: what the user writes (Markdown)
    ppl: str  #: what is emitted, or why it is refused and what to do instead (Markdown)
    module: str  #: the module (path under ``tilelang_tpu/``, no ``.py``) that emits (or refuses) it
    status: str = SUPPORTED
    tile_op: str | None = None  #: the TIR tile-op call dispatched to ``handler``
    handler: Callable[[EmitContext, Any], None] | None = None  #: the function of ``module`` that emits ``tile_op``
    more_ops: tuple[tuple[str, Callable[[EmitContext, Any], None]], ...] = ()  #: further (tile op, handler) pairs of the row
