"""Float casts between tiles, with IEEE overflow: every ``tiu::cast`` between fp32, fp16
and bf16 that the code generator emits goes through :func:`emit_cast`.

Measured on the BM1690 emulator (bit for bit against torch's ``.to()``, on random fp32
bit patterns, edge values and every fp16/bf16 bit pattern): PPL's ``tiu::cast`` rounds to
nearest-even and keeps NaN, and fp16/bf16 -> fp32, fp16 <-> bf16 are exact or IEEE,
overflow to ±inf included.  But fp32 -> fp16 and fp32 -> bf16 **saturate**: ``±inf``, and
every value whose magnitude rounds beyond the largest finite one, become ``±65504``
(fp16) or ``±3.3895e38`` (bf16), where IEEE (torch, TileLang on GPUs) gives ``±inf``.
So after those two casts, two ``tiu::gt_select`` send the elements whose fp32 source is
beyond the rounding threshold to ``±inf`` (``gt_select`` is the IEEE compare on the
emulator, false whenever a NaN is involved, so NaN stays NaN; see ``codegen.emit.select``).

BM1684X's cmodel gives ±inf already (measured on the same values), and its compare-select
refuses an fp32 comparison that writes fp16/bf16, so there the cast stays a plain
``tiu::cast`` (:data:`SATURATING_CHIPS`).

Also measured on both chips, and left as it is: fp32 subnormals (``|x| < 2^-126``) become ``±0`` in the
fp32 -> bf16 cast (torch keeps them as bf16 subnormals); fp16 subnormals are right.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from tilelang_tpu.codegen.layout import DTYPES, FLOAT_DTYPES

if TYPE_CHECKING:
    from tilelang_tpu.codegen.context import EmitContext
    from tilelang_tpu.codegen.values import Tile

__all__ = ["CONVERT_DTYPES", "OVERFLOW_LIMITS", "SATURATING_CHIPS", "emit_cast", "emit_convert", "is_plain", "temp_tiles"]

#: Chips whose fp32 -> fp16/bf16 cast saturates (measured; BM1684X's gives ±inf, and its
#: compare-select refuses an fp32 comparison writing fp16/bf16, so it gets the plain cast).
SATURATING_CHIPS = ("bm1690",)

#: (source, destination) -> the largest fp32 value that rounds to a finite destination value,
#: as a C float literal.  A value above it (``>= 65520`` for fp16, ``>= 0x7F7F8000`` as fp32
#: bits for bf16) rounds to inf in IEEE round-to-nearest-even; PPL's cast saturates it.
OVERFLOW_LIMITS: dict[tuple[str, str], str] = {
    ("float32", "float16"): "65519.99609375f",  # the fp32 value just below 65520
    ("float32", "bfloat16"): "0x1.fefffep+127f",  # fp32 bits 0x7F7F7FFF
}


#: Integer dtypes converted by C's rules: (bits, signed).
_INT_BITS = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False), "int32": (32, True)}

#: Integer dtypes whose values fp32 does not hold exactly: converted to fp16/bf16 through fp32, as C does.
_ROUNDED_TWICE = ("int32",)

#: Dtypes :func:`emit_convert` converts between, every pair.
CONVERT_DTYPES = (*FLOAT_DTYPES, *_INT_BITS)


def emit_convert(
    em: EmitContext, dst: str, src: str, dst_dtype: str, src_dtype: str, temp: Callable[[str], str], in_range: bool = False
) -> None:
    """``dst = src`` converted from ``src_dtype`` to ``dst_dtype``, both in :data:`CONVERT_DTYPES`,
    by C's rules (what TileLang's ``c`` target and torch's ``.to()`` do for in-range values):

    * float -> float: :func:`emit_cast` (IEEE, overflow to ±inf; ``in_range``: see there);
    * int -> float: round to nearest even (``tiu::cast``);
    * float -> int: round toward zero (``tiu::cast`` with ``RM_TOWARDS_ZERO``), through int32 for
      the narrower integers, which then wrap as below;
    * int -> int: value kept when it fits; otherwise wrapped modulo 2^bits (two's complement):
      the value is masked in int32 (and sign-extended for signed types) before the cast, because
      ``tiu::cast`` between integers saturates where C wraps.
    """
    if dst_dtype == src_dtype:
        em.emit(f"tiu::move({dst}, {src});")
        return
    if dst_dtype in FLOAT_DTYPES and src_dtype in FLOAT_DTYPES:
        emit_cast(em, dst, src, dst_dtype, src_dtype, temp, in_range)
        return
    if src_dtype in FLOAT_DTYPES:
        if dst_dtype == "int32":
            em.emit(f"tiu::cast({dst}, {src}, RM_TOWARDS_ZERO);")
            return
        wide = temp("int32")
        em.emit(f"tiu::cast({wide}, {src}, RM_TOWARDS_ZERO);")
        src, src_dtype = wide, "int32"
    if dst_dtype in FLOAT_DTYPES:
        if dst_dtype != "float32" and src_dtype in _ROUNDED_TWICE:
            # C and torch convert an integer to fp16/bf16 through float: int32 -> fp32 rounds first
            # (past 2^24), then fp32 -> 16 bits.  tiu::cast int32 -> bf16 rounds once, which differs
            # where the first rounding makes a tie (measured: 16842753 gave 16908288, torch 16777216).
            wide = temp("float32")
            em.emit(f"tiu::cast({wide}, {src});")
            emit_cast(em, dst, wide, dst_dtype, "float32", temp, in_range or dst_dtype == "bfloat16")  # |int32| < bf16's max
            return
        em.emit(f"tiu::cast({dst}, {src});")
        return
    bits, signed = _INT_BITS[dst_dtype]
    source_bits, source_signed = _INT_BITS[src_dtype]
    if (bits > source_bits and (signed or not source_signed)) or (bits == 32 and signed):
        em.emit(f"tiu::cast({dst}, {src});")  # every source value fits: kept
        return
    wrapped = temp("int32")
    em.emit(f"tiu::cast({wrapped}, {src});")  # exact: every source value fits int32
    em.emit(f"tiu::bitwise_and({wrapped}, {wrapped}, (int32){(1 << bits) - 1});")
    if signed:
        half = 1 << (bits - 1)
        em.emit(f"tiu::bitwise_xor({wrapped}, {wrapped}, (int32){half});")
        em.emit(f"tiu::sub({wrapped}, {wrapped}, {half}, 0, RM_HALF_UP, false);")
    em.emit(f"tiu::cast({dst}, {wrapped});")  # exact: now in range


def emit_cast(
    em: EmitContext, dst: str, src: str, dst_dtype: str, src_dtype: str, temp: Callable[[str], str], in_range: bool = False
) -> None:
    """``dst = src`` converted from ``src_dtype`` to ``dst_dtype`` (fp32/fp16/bf16), IEEE
    round-to-nearest-even with overflow to ±inf.  ``dst`` and ``src`` are tiles or views of
    one shape; ``temp(dtype)`` declares a whole tile of that shape and returns its name.

    A widening or otherwise exact cast is the plain ``tiu::cast``.  A narrowing one adds two
    ``tiu::gt_select`` (``src > limit`` -> +inf, ``-limit > src`` -> -inf, NaN false in both).
    The compare-selects take whole TPU_ALIGN tiles only (ppl-compile rejects a sub-view:
    "dst's layout must be TPU_ALIGN"), so a view is first moved into (or the result cast
    into, then moved from) a ``temp`` tile.

    ``in_range``: every source value is proven within the destination's finite range, or NaN
    (:func:`tilelang_tpu.codegen.ranges.cast_in_range`), so nothing can saturate: the plain cast.
    """
    limit = OVERFLOW_LIMITS.get((src_dtype, dst_dtype))
    if limit is None or em.chip not in SATURATING_CHIPS or in_range:
        em.emit(f"tiu::cast({dst}, {src});")
        return
    source, out = src, dst
    window = ""  # the region of the temporaries that holds the cast, where they are whole-block
    region = _sub_view(em, src)
    if region is not None and not is_plain(em, dst):
        # Both views (a region copy between tiles, at a row offset): temporaries of the source
        # tile's block, so that the region stays in its lanes (a TIU op does not cross lanes).
        parent, window = region
        block = em.dim4var(list(parent.block), "cast_block")
        source, out = em.fresh("cast_src"), em.fresh("cast_dst")
        em.emit(f"auto {source} = make_tensor<{DTYPES[src_dtype]}>({block}, {block});")
        em.emit(f"auto {out} = make_tensor<{DTYPES[dst_dtype]}>({block}, {block});")
        em.emit(f"tiu::move({source}{window}, {src});")
    else:
        if not is_plain(em, src):
            source = temp(src_dtype)
            em.emit(f"tiu::move({source}, {src});")
        if not is_plain(em, dst):
            out = temp(dst_dtype)
    em.emit(f"tiu::cast({out}, {source});")
    lim, nlim, inf, ninf = em.fresh("cast_lim"), em.fresh("cast_nlim"), em.fresh("cast_inf"), em.fresh("cast_ninf")
    em.emit(f"float {lim} = {limit};")
    em.emit(f"float {nlim} = -{lim};")
    em.emit(f"float {inf} = 3.0e38f * 2.0f;")  # no inf literal or builtin in PPL
    em.emit(f"float {ninf} = -{inf};")
    em.emit(f"tiu::gt_select({out}, {source}, {lim}, {inf}, {out});")
    em.emit(f"tiu::gt_select({out}, {nlim}, {source}, {ninf}, {out});")
    if out != dst:
        em.emit(f"tiu::move({dst}, {out}{window});")


def _sub_view(em: EmitContext, text: str) -> tuple[Tile, str] | None:
    """(tile, ``.sub_view(shape, offset)``) for a sub-view ``tile.sub_view(shape, offset)`` of a tile."""
    match = re.fullmatch(r"(\w+)(\.sub_view\(\w+, \w+\))", text)
    if match is None:
        return None
    tile = next((t for t in em.tiles.values() if t.name == match.group(1)), None)
    return None if tile is None else (tile, match.group(2))


def temp_tiles(em: EmitContext, block: str | list[str], shape: str | list[str]) -> Callable[[str], str]:
    """``temp(dtype)`` for :func:`emit_cast`: declares a local tile of ``block`` and ``shape``
    (names of ``dim4`` variables, or their four values, declared on first use) and returns its name."""

    def temp(dtype: str) -> str:
        b = block if isinstance(block, str) else em.dim4var(block, "cast_block")
        s = shape if isinstance(shape, str) else b if shape == block else em.dim4var(shape, "cast_shape")
        name = em.fresh("cast_tmp")
        em.emit(f"auto {name} = make_tensor<{DTYPES[dtype]}>({b}, {s});")
        return name

    return temp


def is_plain(em: EmitContext, text: str) -> bool:
    """True for a whole tile (one ``make_tensor``, TPU_ALIGN), not a view of one."""
    declaration = f"auto {text} = make_tensor<"
    return any(line.lstrip().startswith(declaration) for line in reversed(em.lines))
