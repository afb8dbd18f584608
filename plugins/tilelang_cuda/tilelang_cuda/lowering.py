"""Lowering: upstream TileLang's CUDA pass pipeline; this plugin lowers nothing.

Declaring the target with ``Upstream(UPSTREAM_KIND, ...)`` makes tilecore hand
it to upstream unchanged: the TVM target kind ``"cuda"`` selects upstream's
``BackendModule("cuda")`` and its pass pipeline (``tilelang.cuda.pipeline``),
so ``tilecore_lower`` is never called for this target.

What the plugin still knows about lowering is how the arch steers it: for
sm_90 and newer the pipeline emits TMA bulk copies, ``wgmma`` and warp-group
register reallocation, and the emitted code static-asserts the arch-specific
``sm_90a`` (``sm_100a``, ...) feature set, so plain ``sm_90`` fails in nvcc for
such kernels.  :func:`variant_note` turns that into a message at setup time
instead of an nvcc static-assert later.
"""

from __future__ import annotations

import re

#: The upstream TVM target kind this backend delegates to.
UPSTREAM_KIND = "cuda"

_ARCH = re.compile(r"sm_(\d+)([af]?)")


def variant_note(arch: str) -> str | None:
    """A warning for Hopper-or-newer archs given without the ``a``/``f`` variant, else ``None``."""
    match = _ARCH.fullmatch(arch)
    if match is None or match.group(2) or int(match.group(1)) < 90:
        return None
    return (
        f"arch {arch} has no arch-specific variant: kernels that TileLang lowers to wgmma/TMA (GEMMs, bulk copies) "
        f"static-assert {arch}a and fail in nvcc; use arch={arch}a unless the kernels avoid those instructions"
    )
