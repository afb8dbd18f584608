"""Data-dependent ``T.if_then_else`` inside ``T.Parallel``: comparisons of tile values
(with tiles, per-row vectors, index expressions and scalars), combined with ``&&``,
``||`` and ``!``, selecting fp32/fp16/bf16 or int32 values (masked fills, ReLU-style
clamps, top-k's argmax bookkeeping).

int8/uint8/int16/uint16 data and values are widened to int32 (exact), compared and
selected in int32, and the result narrowed back (exact: it is one of the two narrow
values), so the select is C's.  A condition that folds to a constant bool (``c | False``,
``c & True``, ``True | True``, nested: :func:`_fold`) picks its branch at compile time;
only that branch is computed.

A comparison becomes PPL compare-selects over the whole domain,
``tiu::gt_select / lt_select / eq_select(out, lhs, rhs, if_true, if_false)``, which
compare in the operands' dtype and write the values' dtype (fp32/fp16/bf16 data
selecting int32 or float values, int32 data, scalar operands and in-place updates
were checked on the BM1690 emulator).  Values are copied, never converted, so a
select is exact.  The comparisons follow IEEE:

* float data is compared with ``gt_select`` only, the one compare that is IEEE on the
  emulator (measured: ``lt_select`` is true when exactly one operand is NaN,
  ``eq_select`` has ``NaN == NaN`` and ``-0 != 0``).  ``a < b`` is ``b > a``; ``==``,
  ``>=``, ``<=`` are built from ``>`` and sent to their false value where an operand
  is NaN, ``!=`` to its true value (:func:`_float_compare`, :func:`_nan_guard`);
* int32 data and index expressions are compared as int32 (exact; no NaN, no -0);
* ``c1 && c2`` selects ``c2 ? a : b`` where ``c1`` holds, else ``b``; ``c1 || c2``
  selects ``a`` where ``c1`` holds, else ``c2 ? a : b``; ``!c`` swaps the values.

Every tile operand is a whole TPU_ALIGN tile: the compare-selects abort on strided
views (a broadcast row vector) and sub-views, so those are first copied.  Index
expressions (``j``, ``by * BM + i``) come from the element-wise context's fp32 index
tiles (refused from 2^24 on, where fp32 stops being exact), cast to int32.

A single comparison of index expressions selecting float values keeps the
index-tile mask path (:func:`emit_mask`: causal masks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilelang_tpu.codegen.emit.cast import emit_cast, emit_convert
from tilelang_tpu.codegen.emit.domain import ParallelDomain
from tilelang_tpu.codegen.emit.index_tiles import hoisted_difference, index_tile
from tilelang_tpu.codegen.emit.integers import NARROW_DTYPES
from tilelang_tpu.codegen.ir import as_float
from tilelang_tpu.codegen.layout import FLOAT_DTYPES
from tilelang_tpu.codegen.scalar import HALF_DTYPES, INFINITY, lowest_finite
from tilelang_tpu.codegen.values import Operand

__all__ = ["SELECT_DTYPES", "emit_mask", "emit_select"]

#: Dtypes a select can compare and produce (fp32/fp16/bf16 and int32, checked on the emulator).
SELECT_DTYPES = (*FLOAT_DTYPES, "int32")

#: Integers below this magnitude are exact in fp32 (the index tiles are fp32).
_EXACT_IN_FP32 = 1 << 24

#: The operator of ``b <op> a`` that means the same as ``a <op> b``.
_MIRROR = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}


@dataclass(frozen=True)
class _Value:
    """A select operand: a tile view (``is_tile``) or a named C scalar (the PPL select
    takes its operands by reference)."""

    text: str
    is_tile: bool
    constant: bool = False  #: a compile-time constant scalar (never NaN)


def emit_select(ctx: ParallelDomain, e: Any, dst: str | None) -> Operand | None:
    """``T.if_then_else(cond, a, b)`` in a T.Parallel body; writes ``dst`` when given and of
    the result's dtype (returns None), else returns the result as an operand."""
    from tvm import tirx

    cond, a, b = e.args
    cond = _fold(_logical(cond))
    if _is_bool_constant(cond):  # chosen at compile time: only that branch is computed
        return _chosen(ctx, a if bool(cond.value) else b, str(e.dtype), dst)
    dtype = str(e.dtype)
    if dtype in FLOAT_DTYPES and _index_only(ctx, cond):
        folded = tirx.Call(e.dtype, e.op, [cond, a, b])  # the mask path reads the folded condition
        return emit_mask(ctx, folded, dst)  # causal / sequence-length masks: the index-tile mask path
    if dtype in NARROW_DTYPES:
        return _select_narrow(ctx, cond, a, b, dtype, dst)
    if dtype not in SELECT_DTYPES:
        raise ctx.fail(
            f"T.if_then_else of {dtype} values in a T.Parallel body",
            "select between fp32, fp16, bf16, int32, int16, uint16, int8 or uint8 values",
        )
    if_true, if_false = _value(ctx, a, dtype), _value(ctx, b, dtype)
    if dtype in HALF_DTYPES and not (if_true.is_tile or if_false.is_tile):
        # Two scalar values reach the compare-select as fp32 and the BM1690 emulator kills the
        # process on an fp16/bf16 destination ("The dst and src2/src3 operands should be same
        # type": device differential run, 24 of 12,041 programs).  One value as a tile of the
        # result's dtype is accepted; the fill is exact (the scalar holds a value of that dtype).
        if_true = _filled(ctx, if_true, dtype)
    if dst is not None and ctx.dst_tile.dtype == dtype and _plain(ctx, dst):
        _select(ctx, cond, if_true, if_false, dtype, dst)
        return None
    out = ctx.temp(dtype)  # the caller moves (or casts) it into a partial or other-dtype destination
    _select(ctx, cond, if_true, if_false, dtype, out)
    return Operand(out, dtype, True)


def _chosen(ctx: ParallelDomain, e: Any, dtype: str, dst: str | None) -> Operand | None:
    """The branch ``e`` of a select whose condition is constant, as a tile (the select uses the
    loop indices, so its callers take a tile even where the chosen branch is a scalar)."""
    value = ctx.compute(e, dst)
    if value is None or value.is_tile:
        return value
    out = ctx.output(dtype, dst)
    ctx.em.emit(f"tiu::fill({out}, {value.text});")
    return None if out == dst else Operand(out, dtype, True)


def _select_narrow(ctx: ParallelDomain, cond: Any, a: Any, b: Any, dtype: str, dst: str | None) -> Operand | None:
    """``cond ? a : b`` of int8/uint8/int16/uint16 values: both values widened to int32 (exact),
    selected in int32, the result narrowed back (exact: it is one of the two narrow values)."""
    wide = ctx.temp("int32")
    _select(ctx, cond, _value(ctx, a, "int32"), _value(ctx, b, "int32"), "int32", wide)
    out = ctx.output(dtype, dst)
    emit_convert(ctx.em, out, wide, dtype, "int32", ctx.temp)
    return None if out == dst else Operand(out, dtype, True)


def _select(ctx: ParallelDomain, cond: Any, if_true: _Value, if_false: _Value, dtype: str, out: str) -> None:
    """Write ``cond ? if_true : if_false`` into the tile ``out``."""
    from tvm import tirx

    if isinstance(cond, tirx.Not):
        _select(ctx, cond.a, if_false, if_true, dtype, out)
        return
    if isinstance(cond, (tirx.And, tirx.Or)):
        inner = ctx.temp(dtype)
        _select(ctx, cond.b, if_true, if_false, dtype, inner)
        both = _Value(inner, True)
        if isinstance(cond, tirx.And):
            _select(ctx, cond.a, both, if_false, dtype, out)
        else:
            _select(ctx, cond.a, if_true, both, dtype, out)
        return
    ops = {tirx.GT: "gt", tirx.LT: "lt", tirx.GE: "ge", tirx.LE: "le", tirx.EQ: "eq", tirx.NE: "ne"}
    op = next((name for cls, name in ops.items() if isinstance(cond, cls)), None)
    if op is None:
        raise ctx.fail(
            f"T.if_then_else condition {cond} in a T.Parallel body",
            "conditions are comparisons (<, <=, >, >=, ==, !=) of tile values, index expressions and scalars, combined with &&, || and !",
        )
    dtype_compared = str(cond.a.dtype)
    index_only = _index_only(ctx, cond)
    if dtype_compared not in (*SELECT_DTYPES, *NARROW_DTYPES) and not index_only:
        raise ctx.fail(
            f"comparison of {dtype_compared} values in a T.if_then_else condition",
            "compare fp32, fp16, bf16, int32, int16, uint16, int8 or uint8 values",
        )
    if dtype_compared in FLOAT_DTYPES and not index_only:
        left, right = _value(ctx, cond.a, dtype_compared), _value(ctx, cond.b, dtype_compared)
        _float_compare(ctx, op, left, right, dtype_compared, if_true, if_false, dtype, out)
        return
    # Integers (int32 data, narrower integers widened, or index expressions, compared as int32:
    # exact, no NaN, no -0).
    lhs, rhs = _value(ctx, cond.a, "int32"), _value(ctx, cond.b, "int32")
    if not lhs.is_tile:  # the PPL compare-select's first operand must be a tensor
        lhs, rhs, op = (rhs, lhs, _MIRROR[op]) if rhs.is_tile else (_filled(ctx, lhs, "int32"), rhs, op)
    em = ctx.em
    a, b, t, f = lhs.text, rhs.text, if_true.text, if_false.text
    if op in ("gt", "lt", "eq"):
        em.emit(f"tiu::{op}_select({out}, {a}, {b}, {t}, {f});")
    elif op == "ne":
        em.emit(f"tiu::eq_select({out}, {a}, {b}, {f}, {t});")
    else:  # a >= b is a > b or a == b; a <= b likewise
        equal = ctx.temp(dtype)
        em.emit(f"tiu::eq_select({equal}, {a}, {b}, {t}, {f});")
        em.emit(f"tiu::{'gt' if op == 'ge' else 'lt'}_select({out}, {a}, {b}, {t}, {equal});")


def _float_compare(
    ctx: ParallelDomain, op: str, a: _Value, b: _Value, dtype: str, if_true: _Value, if_false: _Value, values_dtype: str, out: str
) -> None:
    """``out = a <op> b ? if_true : if_false`` for ``dtype`` (fp32/fp16/bf16) data, with IEEE semantics.

    Only ``tiu::gt_select`` is used to compare: on the BM1690 emulator it is IEEE (false
    whenever a NaN is involved, ``-0 > 0`` false), while ``lt_select`` is true when exactly
    one operand is NaN and ``eq_select`` says ``NaN == NaN`` and ``-0 != 0`` (measured).
    So ``a < b`` is ``b > a``; ``a == b`` is neither ``a > b`` nor ``b > a``, ``a >= b`` is
    not ``b > a``, ``a <= b`` not ``a > b``, each then sent to its false value (the true
    one for ``!=``) where an operand is NaN (:func:`_nan_guard`).
    """
    em = ctx.em
    t, f = if_true.text, if_false.text
    if op == "gt":
        em.emit(f"tiu::gt_select({out}, {_filled(ctx, a, dtype).text}, {b.text}, {t}, {f});")
        return
    if op == "lt":
        em.emit(f"tiu::gt_select({out}, {_filled(ctx, b, dtype).text}, {a.text}, {t}, {f});")
        return
    yes, no = (f, t) if op == "ne" else (t, f)  # != is the negation of ==
    ordered = ctx.temp(values_dtype)
    if op == "ge":
        em.emit(f"tiu::gt_select({ordered}, {_filled(ctx, b, dtype).text}, {a.text}, {no}, {yes});")
    elif op == "le":
        em.emit(f"tiu::gt_select({ordered}, {_filled(ctx, a, dtype).text}, {b.text}, {no}, {yes});")
    else:  # == and !=
        above = ctx.temp(values_dtype)
        em.emit(f"tiu::gt_select({above}, {_filled(ctx, a, dtype).text}, {b.text}, {no}, {yes});")
        em.emit(f"tiu::gt_select({ordered}, {_filled(ctx, b, dtype).text}, {a.text}, {no}, {above});")
    maybe_nan = [v for v in (a, b) if not v.constant]
    for n, operand in enumerate(maybe_nan):
        target = out if n == len(maybe_nan) - 1 else ctx.temp(values_dtype)
        _nan_guard(ctx, _filled(ctx, operand, dtype), dtype, no, ordered, values_dtype, target)
        ordered = target
    if not maybe_nan:
        em.emit(f"tiu::move({out}, {ordered});")


def _nan_guard(ctx: ParallelDomain, x: _Value, dtype: str, if_nan: str, otherwise: str, values_dtype: str, out: str) -> None:
    """``out = isnan(x) ? if_nan : otherwise``, from two IEEE ``gt_select``: ``x > -inf``
    holds unless ``x`` is -inf or NaN, and ``lowest > x`` (the most negative finite value)
    holds for -inf only."""
    em = ctx.em
    minus_inf, lowest = em.fresh("minus_inf"), ctx.temp(dtype)
    em.emit(f"float {minus_inf} = -{INFINITY};")
    em.emit(f"tiu::fill({lowest}, {lowest_finite(dtype)});")
    above = ctx.temp(values_dtype)
    em.emit(f"tiu::gt_select({above}, {x.text}, {minus_inf}, {otherwise}, {if_nan});")
    em.emit(f"tiu::gt_select({out}, {lowest}, {x.text}, {otherwise}, {above});")


def _filled(ctx: ParallelDomain, value: _Value, dtype: str) -> _Value:
    """``value`` as a tile (a scalar is filled into one): the first operand of a PPL
    compare-select must be a tensor."""
    if value.is_tile:
        return value
    tile = ctx.temp(dtype)
    ctx.em.emit(f"tiu::fill({tile}, {value.text});")
    return _Value(tile, True)


def _plain(ctx: ParallelDomain, text: str) -> bool:
    """True for a whole tile in the TPU_ALIGN layout (one ``make_tensor``), not a view of one."""
    declaration = f"auto {text} = make_tensor<"
    return any(line.lstrip().startswith(declaration) for line in reversed(ctx.em.lines))


def _aligned(ctx: ParallelDomain, text: str, dtype: str) -> _Value:
    """The tile ``text`` as a TPU_ALIGN tile: the PPL compare-selects read (and write) tiles in
    that layout only (the emulator aborts on a strided view, e.g. a broadcast row vector, or a
    sub-view), so a view is first copied into a temporary tile."""
    if _plain(ctx, text):
        return _Value(text, True)
    tile = ctx.temp(dtype)
    ctx.em.emit(f"tiu::move({tile}, {text});")
    return _Value(tile, True)


def _value(ctx: ParallelDomain, e: Any, dtype: str) -> _Value:
    """``e`` as a select operand of ``dtype``: a scalar variable, an index tile or a tile."""
    from tvm import tirx

    em = ctx.em
    if not ctx.uses_loop_vars(e):
        name = em.fresh("sel")
        if dtype in FLOAT_DTYPES:
            em.emit(f"float {name} = {as_float(em.expr(e))};")
        else:
            em.emit(f"int {name} = {em.expr(e)};")
        return _Value(name, False, constant=isinstance(e, (tirx.FloatImm, tirx.IntImm)))
    if "int" in str(e.dtype) and str(e.dtype) not in NARROW_DTYPES and not _reads_tiles(ctx, e):
        _check_exact(ctx, e)
        indices = index_tile(ctx, e)
        if dtype == "float32":
            return _aligned(ctx, indices, dtype)
        converted = ctx.temp(dtype)
        emit_cast(em, converted, indices, dtype, "float32", ctx.temp)
        return _Value(converted, True)
    operand = ctx.compute(e, None)
    assert operand is not None
    if not operand.is_tile:
        return _value(ctx, e, dtype)
    if operand.dtype in NARROW_DTYPES and dtype == "int32":  # widened: every value fits int32
        widened = ctx.temp(dtype)
        emit_convert(em, widened, operand.text, dtype, operand.dtype, ctx.temp)
        return _Value(widened, True)
    if operand.dtype != dtype:
        if operand.dtype not in FLOAT_DTYPES or dtype not in FLOAT_DTYPES:
            raise ctx.fail(f"T.if_then_else mixing {operand.dtype} and {dtype} values", "cast the operands to one dtype")
        converted = ctx.temp(dtype)
        emit_cast(em, converted, operand.text, dtype, operand.dtype, ctx.temp)
        return _Value(converted, True)
    return _aligned(ctx, operand.text, dtype)


def _logical(cond: Any) -> Any:
    """``cond`` with ``&``, ``|`` and ``~`` of conditions (``T.bitwise_and`` of two bools, the way
    upstream writes band masks) as the logical ``and``, ``or`` and ``not`` they mean."""
    from tvm import tirx

    from tilelang_tpu.codegen.ir import op_name

    if isinstance(cond, tirx.Call) and str(cond.dtype) == "bool":
        op = op_name(cond)
        args = [_logical(x) for x in cond.args]
        if op == "tirx.bitwise_and" and len(args) == 2:
            return tirx.And(args[0], args[1])
        if op == "tirx.bitwise_or" and len(args) == 2:
            return tirx.Or(args[0], args[1])
        if op == "tirx.bitwise_not" and len(args) == 1:
            return tirx.Not(args[0])
    if isinstance(cond, (tirx.And, tirx.Or)):
        return type(cond)(_logical(cond.a), _logical(cond.b))
    if isinstance(cond, tirx.Not):
        return tirx.Not(_logical(cond.a))
    return cond


def _is_bool_constant(cond: Any) -> bool:
    from tvm import tirx

    return isinstance(cond, tirx.IntImm) and str(cond.dtype) == "bool"


def _fold(cond: Any) -> Any:
    """``cond`` (after :func:`_logical`) with its constant bool parts folded: ``x && true`` is
    ``x``, ``x && false`` is ``false``, ``x || true`` is ``true``, ``x || false`` is ``x``,
    ``!true`` is ``false``, nested; a condition that folds to a constant picks its branch at
    compile time (C evaluates the same value; the conditions are pure)."""
    from tvm import tirx

    if isinstance(cond, tirx.Not):
        inner = _fold(cond.a)
        return tirx.const(not bool(inner.value), "bool") if _is_bool_constant(inner) else tirx.Not(inner)
    if isinstance(cond, (tirx.And, tirx.Or)):
        a, b = _fold(cond.a), _fold(cond.b)
        absorbing = isinstance(cond, tirx.Or)  # true absorbs ||, false absorbs &&
        for side, other in ((a, b), (b, a)):
            if _is_bool_constant(side):
                return side if bool(side.value) == absorbing else other
        return type(cond)(a, b)
    return cond


def _index_only(ctx: ParallelDomain, cond: Any) -> bool:
    """True for a single comparison of integer expressions of loop/block indices and scalars."""
    from tvm import tirx

    comparisons = (tirx.GT, tirx.LT, tirx.GE, tirx.LE, tirx.EQ, tirx.NE)
    return isinstance(cond, comparisons) and all("int" in str(side.dtype) for side in (cond.a, cond.b)) and not _reads_tiles(ctx, cond)


def _reads_tiles(ctx: ParallelDomain, e: Any) -> bool:
    from tvm import tirx

    found: list[Any] = []
    tirx.stmt_functor.post_order_visit(
        tirx.Evaluate(e), lambda n: found.append(n) if isinstance(n, tirx.BufferLoad) and n.buffer.data in ctx.em.tiles else None
    )
    return bool(found)


def _check_exact(ctx: ParallelDomain, e: Any) -> None:
    """Refuse an index expression whose values may reach 2^24 (fp32 index tiles would round)."""
    from tvm import ir, tirx

    analyzer = ctx.em.analyzer
    for index, extent in zip(ctx.index, ctx.extents, strict=True):
        if isinstance(index, tirx.Var):
            analyzer.bind(index, ir.Range.from_min_extent(0, extent))
    bound = analyzer.const_int_bound(e)
    if max(abs(int(bound.min_value)), abs(int(bound.max_value))) >= _EXACT_IN_FP32:
        raise ctx.fail(
            f"index expression {e} in a T.if_then_else that may reach 2^24",
            "the tpu target builds index values as exact fp32 integers (below 2^24); use smaller offsets",
        )


def emit_mask(ctx: ParallelDomain, e: Any, dst: str | None) -> Operand | None:
    """``T.if_then_else(cond, a, b)`` whose condition compares integer expressions of the
    loop (and block) indices: causal and sequence-length masks.

    The difference of the two sides is computed as an fp32 tile of exact integers
    (|values| < 2^24) from index tiles (:func:`~tilelang_tpu.codegen.emit.index_tiles.axis_tile`), then ``tiu::gt_select`` /
    ``tiu::lt_select`` pick ``a`` or ``b`` per element against a half-integer threshold.
    """
    from tvm import tirx

    em = ctx.em
    cond, a, b = e.args
    dtype = str(e.dtype)
    if dtype not in FLOAT_DTYPES:
        raise ctx.fail(f"T.if_then_else of {dtype} values in a T.Parallel body", "select between fp32, fp16 or bf16 values")
    compare = {
        tirx.GE: (False, "gt", "-0.5f"),
        tirx.GT: (False, "gt", "0.5f"),
        tirx.LE: (True, "gt", "-0.5f"),
        tirx.LT: (True, "gt", "0.5f"),
    }
    kind = next((v for k, v in compare.items() if isinstance(cond, k)), None)
    if isinstance(cond, (tirx.EQ, tirx.NE)):
        kind = (False, "lt" if isinstance(cond, tirx.EQ) else "gt", "0.5f")
    if kind is None or not all("int" in str(x.dtype) for x in (cond.a, cond.b)):
        raise ctx.fail(
            f"T.if_then_else condition {cond} in a T.Parallel body",
            "conditions compare integer expressions of the loop and block indices (<, <=, >, >=, ==, !=)",
        )
    swap, op, threshold = kind
    difference = tirx.Sub(cond.b, cond.a) if swap else tirx.Sub(cond.a, cond.b)
    hoisted = None if isinstance(cond, (tirx.EQ, tirx.NE)) else hoisted_difference(ctx, difference, threshold)
    if hoisted is not None:
        diff, limit_value = hoisted
    else:
        diff, limit_value = index_tile(ctx, difference), threshold
    if isinstance(cond, (tirx.EQ, tirx.NE)):
        absolute = ctx.temp("float32")
        em.emit(f"tiu::fabs({absolute}, {diff});")
        diff = absolute
    operands = []
    for value in (a, b):
        v = ctx.compute(value, None)
        assert v is not None
        if v.is_tile and v.dtype != "float32":
            t = ctx.temp("float32")
            emit_cast(em, t, v.text, "float32", v.dtype, ctx.temp)
            v = Operand(t, "float32", True)
        if not v.is_tile:  # the select takes its scalar operands by reference
            name = em.fresh("sel")
            em.emit(f"float {name} = {as_float(v.text)};")
            v = Operand(name, "float32", False)
        else:  # a broadcast row vector or a sub-view: the emulator aborts on it (src2 not TPU_ALIGN)
            v = Operand(_aligned(ctx, v.text, "float32").text, "float32", True)
        operands.append(v.text)
    limit = em.fresh("limit")
    em.emit(f"float {limit} = {limit_value};")
    out = ctx.output(dtype, dst) if dtype == "float32" else ctx.temp("float32")
    em.emit(f"tiu::{op}_select({out}, {diff}, {limit}, {operands[0]}, {operands[1]});")
    if dtype != "float32":
        final = ctx.output(dtype, dst)
        emit_cast(em, final, out, dtype, "float32", ctx.temp)
        out = final
    return None if out == dst else Operand(out, dtype, True)
