"""Value ranges of float tiles: what the statements before a statement prove about the values
it reads, so that the code generator can leave out work whose only purpose is a range it
cannot otherwise rule out.  Two uses, each dropping work only when the proof holds:

* :func:`cast_in_range` -- a narrowing tile copy (fp32 -> fp16/bf16) whose source lies within
  the destination's finite range (or is NaN) needs no overflow fix (the two ``gt_select`` of
  :mod:`tilelang_tpu.codegen.emit.cast`).  Flash attention's ``P = exp2(s * c - rowmax(s) * c)``
  lies in [0, 1]: ``s <= rowmax(s)`` element by element, so the argument is <= 0.
* :func:`safe_rsqrts` -- ``1 / sqrt(x)`` (tilelang's lowering of ``T.rsqrt``) may be PPL's
  ``tiu::frsqrt`` only where ``x`` is not in ``(0, 2^-125)``, where ``frsqrt`` is wrong
  (:data:`RSQRT_MIN`): an RMSNorm's ``sum(x * x) / N + eps`` is at least ``eps``.

An interval ``[lo, hi]`` bounds every non-NaN value (NaN is always allowed: a cast keeps it, and
the overflow fix leaves it alone).  The facts, from TIR semantics alone:

* the value a statement leaves in a whole tile: a constant fill; a whole-tile ``T.Parallel``
  store (the range of its expression); a row reduction ``sum``/``max``/``min`` of a whole tile
  with ``clear=True`` (from the reduced tile's range);
* loads of a tile take the range its last writer left, looked up in the statements before the
  writer; anything written outside the sequence, by a partial write, or by an op this module
  does not know is unknown, and so is every tile an op may write without saying so (a bare
  pointer to its data);
* ``x * x`` is >= 0 whatever ``x`` is; ``exp``/``exp2`` of ``[lo, hi]`` is ``[0, exp(hi)]``
  (with a relative slack of 2^-10 for PPL's approximation); ``+ - * /`` by interval arithmetic;
* the row-max order: ``T.reduce_max(a, m, dim=d)`` (``clear`` either way: with ``clear=False``
  ``m`` only grows) leaves ``m[I without d] >= a[I]`` for every non-NaN element, until ``a``
  is written again or ``m`` other than by ``m[I] = T.max(m[I], x)`` (upstream's running max,
  which only grows); so ``f(a[I]) - f(m[I without d])`` is <= 0 for ``f(v) = v`` and
  ``f(v) = v * c``, ``c >= 0`` a constant (rounding is monotonic, so the computed values keep
  the order; ``inf - inf`` is NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tilelang_tpu.codegen.ir import op_name, parallel_store, region, same_expr, tile_call, whole

__all__ = [
    "DIVISOR_RANGE",
    "RSQRT_MIN",
    "Interval",
    "cast_in_range",
    "expr_range",
    "reciprocal_sqrt",
    "safe_divisor",
    "safe_rsqrts",
    "tile_range",
]

#: The smallest argument for which ``tiu::frsqrt`` is accurate (measured on the BM1690 emulator:
#: 1.17 fp32 ulp at most for x in [2^-125, 3.4e38]; inf for x in (0, 2^-125), where torch
#: gives up to 2.6e22).  0, inf and negative arguments are right (inf, 0, NaN).
RSQRT_MIN = 2.0**-124

#: Divisor magnitudes for which ``tiu::fdiv`` is right without rescaling (measured on the BM1690
#: emulator, fp32 and bf16: ``a / b`` is ±inf for ``|b| < 2^-125`` and 0 for ``|b| >= 2^126``,
#: its reciprocal of ``b`` leaving the normal range); a margin of 2^25 either side.
DIVISOR_RANGE = (2.0**-100, 2.0**100)

#: Largest finite value of each narrow float dtype (a value within it never overflows the cast).
FINITE_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}

#: How many writers back a range is followed (a chain of tiles), to keep the analysis cheap.
_DEPTH = 6

_EXP = {"tirx.exp": math.e, "tirx.exp2": 2.0, "expf": math.e, "exp": math.e, "__expf": math.e, "exp2f": 2.0, "exp2": 2.0, "__exp2f": 2.0}
_SQRT = ("tirx.sqrt", "sqrtf", "sqrt")


@dataclass(frozen=True)
class Interval:
    """Every non-NaN value ``v`` satisfies ``lo <= v <= hi`` (bounds may be infinite)."""

    lo: float
    hi: float

    @staticmethod
    def any() -> Interval:
        return Interval(-math.inf, math.inf)

    def within(self, bound: float) -> bool:
        return -bound <= self.lo and self.hi <= bound


def _hull(values: Sequence[float]) -> Interval | None:
    if any(math.isnan(v) for v in values):
        return None  # inf - inf or 0 * inf among the corners: no bound worth having
    return Interval(min(values), max(values))


def _call(e: Any) -> tuple[str, list[Any]] | None:
    """(function name, arguments) of a call, an extern's name for ``call_pure_extern``."""
    from tvm import tirx

    if not isinstance(e, tirx.Call):
        return None
    name, args = op_name(e), list(e.args)
    if name in ("tirx.call_pure_extern", "tirx.call_extern") and args and isinstance(args[0], tirx.StringImm):
        return str(args[0].value), args[1:]
    return name, args


def _writes(stmt: Any, data: Any) -> bool | None:
    """Whether ``stmt`` writes the tile whose data variable is ``data``: True, False, or None
    when it cannot tell (the data variable used other than through a load, a store or a
    ``T.region`` whose access mask says read or write)."""
    from tvm import tirx

    wrote, unknown = [False], [False]

    def visit(node: Any) -> None:
        if isinstance(node, tirx.BufferStore) and node.buffer.data.same_as(data):
            wrote[0] = True
        elif isinstance(node, tirx.Call) and op_name(node) == "tl.region" and isinstance(node.args[0], tirx.BufferLoad):
            if node.args[0].buffer.data.same_as(data) and int(node.args[1]) & 2:
                wrote[0] = True
        elif isinstance(node, tirx.Var) and node.same_as(data):
            unknown[0] = True

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return None if unknown[0] else wrote[0]


def _last_writer(before: Sequence[Any], data: Any) -> int | None:
    """Index in ``before`` of the last statement that writes ``data`` (None: none, or unknown)."""
    for index in range(len(before) - 1, -1, -1):
        written = _writes(before[index], data)
        if written is None:
            return None
        if written:
            return index
    return None


def tile_range(before: Sequence[Any], data: Any, depth: int = _DEPTH) -> Interval | None:
    """The range of every element of the tile ``data`` after the statements ``before`` (one
    sequence, in order), or None when they do not prove one."""
    from tvm import tirx

    index = _last_writer(before, data) if depth > 0 else None
    if index is None:
        return None
    writer, earlier = before[index], before[:index]
    fill = tile_call(writer, "tl.tileop.fill")
    if fill is not None:
        buf, mins, ext = region(fill.args[0])
        value = fill.args[1]
        if buf.data.same_as(data) and whole(buf, mins, ext) and isinstance(value, (tirx.FloatImm, tirx.IntImm)):
            number = float(value.value)
            return None if math.isnan(number) else Interval(number, number)
        return None
    reduce = tile_call(writer, "tl.tileop.reduce")
    if reduce is not None:
        (src, smin, sext), (dst, dmin, dext) = region(reduce.args[0]), region(reduce.args[1])
        kind, dim, clear = str(reduce.args[2].value), int(reduce.args[3]), bool(int(reduce.args[4]))
        if not (clear and dst.data.same_as(data) and whole(src, smin, sext) and whole(dst, dmin, dext)):
            return None
        if src.data.same_as(data):
            return None
        if kind == "sum" and _shifted_exps(earlier, src, dim):
            # Softmax's row sum: every term is in [0, 1] and the maximum's is exp(0) = 1.
            return Interval(0.5, int(src.shape[dim]) * (1 + 2**-10))
        source = tile_range(earlier, src.data, depth - 1)
        if source is None:
            return None
        if kind in ("max", "min"):
            return source
        if kind == "sum":
            count = int(src.shape[dim])
            return _hull([source.lo * count, source.hi * count])
        return None
    found = _store(writer)
    if found is None:
        return None
    store, loops = found
    if not store.buffer.data.same_as(data) or not _covers(store, loops):
        return None
    return expr_range(store.value, earlier, depth - 1)


def _shifted_exps(before: Sequence[Any], tile: Any, dim: int) -> bool:
    """Whether the statements ``before`` leave in ``tile`` (a whole 2-D tile) ``exp(x - m)``
    (or ``exp2``, the difference optionally times a positive constant) with ``m`` the
    ``reduce_max`` of ``x`` along ``dim``: softmax's numerators, each in [0, 1], one of them 1
    in every row (``x`` written neither between the max and the exps nor by them)."""
    from tvm import tirx

    index = _last_writer(before, tile.data)
    found = _store(before[index]) if index is not None else None
    if index is None or found is None or len(tile.shape) != 2:
        return False
    store, loops = found
    call = _call(store.value)
    if not (store.buffer.data.same_as(tile.data) and _covers(store, loops) and call is not None and call[0] in _EXP):
        return False
    arg = call[1][0]
    if isinstance(arg, tirx.Mul) and isinstance(arg.b, tirx.FloatImm) and float(arg.b.value) > 0:
        arg = arg.a
    if not (isinstance(arg, tirx.Sub) and isinstance(arg.a, tirx.BufferLoad) and isinstance(arg.b, tirx.BufferLoad)):
        return False
    x, m = arg.a, arg.b
    kept = [i for d, i in enumerate(x.indices) if d != dim]
    if not (
        len(x.indices) == 2
        and all(a.same_as(b) for a, b in zip(x.indices, store.indices, strict=True))
        and len(m.indices) == 1
        and m.indices[0].same_as(kept[0])
    ):
        return False
    earlier = before[:index]
    at = _last_writer(earlier, m.buffer.data)
    reduce = tile_call(earlier[at], "tl.tileop.reduce") if at is not None else None
    if at is None or reduce is None:
        return False
    (src, smin, sext), (dst, dmin, dext) = region(reduce.args[0]), region(reduce.args[1])
    return (
        str(reduce.args[2].value) == "max"
        and int(reduce.args[3]) == dim
        and bool(int(reduce.args[4]))
        and _same_values(earlier[:at], src, x.buffer)
        and dst.data.same_as(m.buffer.data)
        and whole(src, smin, sext)
        and whole(dst, dmin, dext)
        and _last_writer(before[: index + 1], x.buffer.data) in (None, *range(at))
    )


def _same_values(before: Sequence[Any], tile: Any, source: Any) -> bool:
    """Whether ``tile`` is the buffer ``source``, or a whole copy of it that ``before`` made last
    (tilelang stages a shared tile into a fragment for a reduction)."""
    if tile.data.same_as(source.data):
        return True
    index = _last_writer(before, tile.data)
    copy = tile_call(before[index], "tl.tileop.copy") if index is not None else None
    if copy is None:
        return False
    (src, smin, sext), (dst, dmin, dext) = region(copy.args[0]), region(copy.args[1])
    return (
        src.data.same_as(source.data)
        and dst.data.same_as(tile.data)
        and whole(src, smin, sext)
        and whole(dst, dmin, dext)
        and _last_writer(before[index:], source.data) is None
    )


def _store(stmt: Any) -> tuple[Any, list[tuple[Any, int]]] | None:
    """(store, loops) of a T.Parallel nest around one store, or of a bare store (no loops: tilelang
    folds ``T.Parallel(1)`` away, leaving ``m[0] = ...`` for a one-row tile)."""
    from tvm import tirx

    return (stmt, []) if isinstance(stmt, tirx.BufferStore) else parallel_store(stmt)


def _covers(store: Any, loops: list[tuple[Any, int]]) -> bool:
    """Whether a T.Parallel store writes every element of its tile: each index is the next loop
    variable, over the whole dimension, or 0 in a dimension of 1 (tilelang folds a loop of one)."""
    from tvm import tirx

    rest = list(loops)
    for index, dim in zip(store.indices, store.buffer.shape, strict=True):
        if not isinstance(dim, tirx.IntImm):
            return False
        if isinstance(index, tirx.IntImm) and int(index) == 0 and int(dim) == 1:
            continue
        if not (rest and isinstance(index, tirx.Var) and index.same_as(rest[0][0]) and rest[0][1] == int(dim)):
            return False
        rest.pop(0)
    return not rest


def expr_range(e: Any, before: Sequence[Any], depth: int = _DEPTH) -> Interval | None:
    """The range of the float expression ``e`` of a T.Parallel store, whose tile loads read the
    values the statements ``before`` left (None when unknown)."""
    from tvm import tirx

    if isinstance(e, (tirx.FloatImm, tirx.IntImm)):
        number = float(e.value)
        return None if math.isnan(number) else Interval(number, number)
    if isinstance(e, tirx.BufferLoad):
        return tile_range(before, e.buffer.data, depth)
    if isinstance(e, tirx.Cast) and "float" in str(e.dtype) and "float" in str(e.value.dtype):
        inner = expr_range(e.value, before, depth)
        # a narrowing cast rounds: at most one unit in the last place of bf16 (2^-8) either way
        return None if inner is None else _hull([inner.lo - abs(inner.lo) * 2**-7, inner.hi + abs(inner.hi) * 2**-7])
    if isinstance(e, tirx.Mul) and _same(e.a, e.b):
        return Interval(0.0, math.inf)  # a square: >= 0 whatever the operand (NaN stays NaN)
    if isinstance(e, tirx.Sub) and _ordered(e.a, e.b, before):
        return Interval(-math.inf, 0.0)
    if isinstance(e, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Max, tirx.Min)):
        a, b = expr_range(e.a, before, depth), expr_range(e.b, before, depth)
        if a is None or b is None:
            return None
        if isinstance(e, tirx.Add):
            return _hull([a.lo + b.lo, a.hi + b.hi])
        if isinstance(e, tirx.Sub):
            return _hull([a.lo - b.hi, a.hi - b.lo])
        if isinstance(e, tirx.Max):
            return Interval(max(a.lo, b.lo), max(a.hi, b.hi))
        if isinstance(e, tirx.Min):
            return Interval(min(a.lo, b.lo), min(a.hi, b.hi))
        if isinstance(e, tirx.Div):
            if b.lo != b.hi or b.lo == 0.0 or math.isinf(b.lo):
                return None  # only the division by a nonzero constant
            b = Interval(1.0 / b.lo, 1.0 / b.lo)
        return _hull([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
    call = _call(e)
    if call is not None and len(call[1]) == 1:
        name, (arg,) = call
        inner = expr_range(arg, before, depth)
        if name in _EXP:
            hi = math.inf if inner is None or inner.hi * math.log(_EXP[name]) > 88.0 else _EXP[name] ** inner.hi * (1 + 2**-10)
            return Interval(0.0, hi)
        if name in _SQRT and inner is not None:
            return Interval(math.sqrt(max(inner.lo, 0.0)), math.sqrt(inner.hi) if inner.hi > 0 else 0.0)
    return None


def _same(a: Any, b: Any) -> bool:
    return same_expr(a, b)  # not structural_equal alone: it equates X0[i] * X1[i] with a square


def _monotone_load(e: Any) -> tuple[Any, Any] | None:
    """(the load, the factor: a FloatImm or None) when ``e`` is ``load`` or ``load * c``/``c * load``."""
    from tvm import tirx

    if isinstance(e, tirx.BufferLoad):
        return e, None
    if isinstance(e, tirx.Mul):
        if isinstance(e.a, tirx.BufferLoad) and isinstance(e.b, tirx.FloatImm):
            return e.a, e.b
        if isinstance(e.b, tirx.BufferLoad) and isinstance(e.a, tirx.FloatImm):
            return e.b, e.a
    return None


def _ordered(x: Any, y: Any, before: Sequence[Any]) -> bool:
    """Whether ``x <= y`` for every non-NaN pair, by the row-max order (module docstring)."""
    xs, ys = _monotone_load(x), _monotone_load(y)
    if xs is None or ys is None:
        return False
    (a, ca), (m, cm) = xs, ys
    if (ca is None) != (cm is None) or (ca is not None and not (float(ca.value) == float(cm.value) and float(ca.value) >= 0.0)):
        return False
    if a.buffer.dtype != m.buffer.dtype or a.buffer.data.same_as(m.buffer.data):
        return False
    index = _last_writer(before, m.buffer.data)
    while index is not None and _keeps_growing(before[index], m.buffer.data):
        index = _last_writer(before[:index], m.buffer.data)  # m = max(m, x) only grows: look further back
    if index is None:
        return False
    reduce = tile_call(before[index], "tl.tileop.reduce")
    if reduce is None or str(reduce.args[2].value) != "max":
        return False
    (src, smin, sext), (dst, dmin, dext) = region(reduce.args[0]), region(reduce.args[1])
    if not (
        _same_values(before[:index], src, a.buffer)
        and dst.data.same_as(m.buffer.data)
        and whole(src, smin, sext)
        and whole(dst, dmin, dext)
    ):
        return False
    if any(_writes(stmt, a.buffer.data) is not False for stmt in before[index + 1 :]):
        return False  # the reduced tile changed since (or may have)
    dim = int(reduce.args[3])
    kept = [i for n, i in enumerate(a.indices) if n != dim]
    return len(kept) == len(m.indices) and all(_same(p, q) for p, q in zip(kept, m.indices, strict=True))


def _keeps_growing(stmt: Any, data: Any) -> bool:
    """Whether ``stmt`` is a whole-tile ``m[I] = T.max(m[I], x)`` (or ``T.max(x, m[I])``) of the
    tile ``data``: upstream's running max after ``T.reduce_max``; every element only grows."""
    from tvm import tirx

    found = _store(stmt)
    if found is None:
        return False
    store, loops = found
    value = store.value
    if not (store.buffer.data.same_as(data) and _covers(store, loops) and isinstance(value, tirx.Max)):
        return False
    return any(
        isinstance(side, tirx.BufferLoad)
        and side.buffer.data.same_as(data)
        and all(_same(p, q) for p, q in zip(side.indices, store.indices, strict=True))
        for side in (value.a, value.b)
    )


def cast_in_range(before: Sequence[Any], stmt: Any) -> Any:
    """The data variable of the source tile when ``stmt`` is a tile-to-tile ``T.copy`` that
    narrows fp32 to fp16/bf16 and the statements ``before`` prove every source element within
    the destination's finite range (or NaN); else None.  Such a cast needs no overflow fix."""
    copy = tile_call(stmt, "tl.tileop.copy")
    if copy is None:
        return None
    src, dst = region(copy.args[0])[0], region(copy.args[1])[0]
    bound = FINITE_MAX.get(str(dst.dtype))
    if bound is None or str(src.dtype) != "float32" or "local" not in src.scope():
        return None
    values = tile_range(before, src.data)
    # the interval is of real values: keep a margin for the rounding of each step
    return src.data if values is not None and values.within(bound * (1 - 2**-8)) else None


def safe_rsqrts(before: Sequence[Any], stmt: Any) -> list[Any]:
    """The ``1 / sqrt(x)`` expressions (fp32) of ``stmt``, a single T.Parallel store, whose ``x``
    the statements ``before`` prove >= :data:`RSQRT_MIN` (``tiu::frsqrt`` is accurate there)."""
    from tvm import tirx

    found = parallel_store(stmt)
    if found is None:
        return []
    safe: list[Any] = []

    def visit(node: Any) -> None:
        arg = reciprocal_sqrt(node)
        if arg is not None:
            values = expr_range(arg, before)
            if values is not None and values.lo >= RSQRT_MIN:
                safe.append(node)

    tirx.stmt_functor.post_order_visit(found[0].value, visit)
    return safe


def reciprocal_sqrt(e: Any) -> Any:
    """``x`` when ``e`` is the fp32 ``1 / sqrt(x)`` (how tilelang's LowerIntrin writes
    ``T.rsqrt(x)``: a ``Div`` of the constant 1 by ``sqrtf``), else None."""
    from tvm import tirx

    if not (isinstance(e, tirx.Div) and str(e.dtype) == "float32" and isinstance(e.a, tirx.FloatImm) and float(e.a.value) == 1.0):
        return None
    call = _call(e.b)
    if call is not None and call[0] in _SQRT and len(call[1]) == 1 and str(call[1][0].dtype) == "float32":
        return call[1][0]
    return None


def safe_divisor(b: Any, before: Sequence[Any]) -> bool:
    """Whether the divisor ``b`` of a T.Parallel store is proven within :data:`DIVISOR_RANGE` in
    magnitude, or is a ``sqrt`` (whose result, 0, inf, NaN or within [2^-63, 2^64], ``fdiv``
    handles), so that ``tiu::fdiv`` needs no rescaling; the statements ``before`` give the ranges."""
    call = _call(b)
    if call is not None and call[0] in _SQRT:
        return True
    values = expr_range(b, before)
    if values is None:
        return False
    low, high = DIVISOR_RANGE
    return (low <= values.lo and values.hi <= high) or (-high <= values.lo and values.hi <= -low)
