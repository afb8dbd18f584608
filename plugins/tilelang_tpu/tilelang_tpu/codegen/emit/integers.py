"""Integer values in ``T.Parallel`` bodies: int32 arithmetic, bit operations and shifts,
loop indices used as values, and casts between integer and float tiles.

TileLang (like C, and the ``c`` target) computes int32 with two's-complement wrap-around;
PPL's integer TIU instructions do the same when asked for no saturation:

* ``a + b``, ``a - b``, ``a * b``, ``max``, ``min`` -> ``tiu::add/sub/mul/max/min``
  (saturation off: ``mul``'s default, given explicitly to ``add`` and ``sub``);
* ``&``, ``|``, ``^`` -> ``tiu::bitwise_and/or/xor``; ``~x`` is ``x ^ -1``;
* ``x << k``, ``x >> k`` -> ``tiu::shift`` by ``+k`` / ``-k`` rounding down (an arithmetic
  shift right, as C's ``>>`` on int32); a shift amount that differs per element is cast to
  an int8 tile first.  TVM already writes ``x // 2**k`` and ``x % 2**k`` this way;
* ``x // c``, ``x % c`` (floor division, TileLang's ``//``/``%``) and C's truncating
  ``T.truncdiv``/``T.truncmod`` by a positive constant ``c``: an fp32 estimate of the
  quotient, corrected twice with exact int32 remainders (see :func:`_divide`).  A truncating
  division or remainder of a narrowing cast that may wrap (``T.cast(bx * 64 + i, "int8") // 3``)
  is refused: TVM's ``Simplify`` may have made it from a floor division, believing the cast
  cannot wrap (:func:`~tilelang_tpu.codegen.ir.wrapping_cast`);
* a loop variable used as a value (``T.cast(j, "float32")``, ``j + bx * 64``): the exact
  fp32 index tile of :mod:`.index_tiles`, cast to int32;
* casts between every pair of fp32/fp16/bf16/int32/int16/int8/uint16/uint8 by C's rules
  (:func:`~tilelang_tpu.codegen.emit.cast.emit_convert`).

int8, uint8, int16 and uint16 arithmetic (upstream's int4 unpacking: ``(b >> s) & 0xF`` on a
uint8 tile, ``T.reinterpret("int8", x << 4) >> 4``) is computed as C (and TileLang's ``c``
target) computes it: the operands promoted to int32, the operations in int32, the value
truncated to the narrow type only where it is stored, cast or bound to a variable
(:func:`~tilelang_tpu.codegen.emit.cast.emit_convert`).  ``T.reinterpret`` between integer
types of one width is that truncation.  (Performance: each narrow operation adds its widening
and wrapping casts, about four TIU instructions.)  Other integer dtypes (int64, uint32) are
refused by name: ``T.cast`` them to int32 first.
"""

from __future__ import annotations

from typing import Any

from tilelang_tpu.codegen.emit.cast import emit_convert, is_plain
from tilelang_tpu.codegen.emit.domain import ParallelDomain
from tilelang_tpu.codegen.emit.index_tiles import axis_tile
from tilelang_tpu.codegen.ir import op_name, wrapping_cast
from tilelang_tpu.codegen.values import Operand

__all__ = ["INT_DTYPES", "emit_integer", "integer_op", "loop_index"]

#: Integer dtypes the element-wise integer instructions compute in.
INT_DTYPES = ("int32",)

#: Integer dtypes computed in int32 and wrapped back (C's integer promotion).
NARROW_DTYPES = ("int8", "uint8", "int16", "uint16")

#: Bits of the integer dtypes ``T.reinterpret`` converts between.
_WIDTH = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32}


_ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul", "Max": "max", "Min": "min"}
_BITWISE = {"tirx.bitwise_and": "bitwise_and", "tirx.bitwise_or": "bitwise_or", "tirx.bitwise_xor": "bitwise_xor"}
_SHIFTS = {"tirx.shift_left": 1, "tirx.shift_right": -1}
_DIVISIONS = {"FloorDiv": ("floor", "div"), "FloorMod": ("floor", "mod"), "Div": ("trunc", "div"), "Mod": ("trunc", "mod")}
_INTEGER_CALLS = (*_BITWISE, *_SHIFTS, "tirx.bitwise_not", "tirx.reinterpret")


def integer_op(e: Any) -> bool:
    """Whether ``e`` is an integer operation this module computes."""
    from tvm import tirx

    if "int" not in str(e.dtype) or str(e.dtype) == "bool":
        return False
    if isinstance(e, tirx.Call) and op_name(e) == "tirx.reinterpret":
        return _WIDTH.get(str(e.dtype)) is not None and _WIDTH.get(str(e.dtype)) == _WIDTH.get(str(e.args[0].dtype))
    if type(e).__name__ in _ARITH or type(e).__name__ in _DIVISIONS:
        return True
    return isinstance(e, tirx.Call) and op_name(e) in _INTEGER_CALLS


def loop_index(ctx: ParallelDomain, var: Any) -> Operand:
    """An int32 tile holding loop variable ``var`` at every element of the domain."""
    from tvm import tirx

    dims = [d for d, idx in enumerate(ctx.index) if isinstance(idx, tirx.Var) and idx.same_as(var)]
    if not dims:
        raise ctx.fail(
            f"loop variable {var.name} used as a value in a T.Parallel store that it does not index",
            "index the stored tile by every T.Parallel variable",
        )
    out = ctx.temp("int32")
    ctx.em.emit(f"tiu::cast({out}, {axis_tile(ctx, dims[0])});")  # exact: indices are far below 2^24
    return Operand(out, "int32", True)


def emit_integer(ctx: ParallelDomain, e: Any, dst: str | None) -> Operand | None:
    """Compute the integer operation ``e`` (:func:`integer_op`) over the domain."""
    from tvm import tirx

    dtype = str(e.dtype)
    reinterpret = isinstance(e, tirx.Call) and op_name(e) == "tirx.reinterpret"
    if dtype in NARROW_DTYPES or (reinterpret and dtype in _WIDTH):
        # C promotes narrow integers to int and truncates only where a value is stored, cast or
        # reinterpreted (what TileLang's c target does): the operation in int32, unwrapped.
        wide = _emit_as(ctx, e, None, "int32")
        assert wide is not None
        if not reinterpret and (dst is None or ctx.dst_tile.dtype != dtype):
            return wide
        out = ctx.output(dtype, dst)  # stored, or reinterpreted: wrapped to the narrow type
        emit_convert(ctx.em, out, wide.text, dtype, "int32", ctx.temp)
        return None if out == dst else Operand(out, dtype, True)
    if dtype not in INT_DTYPES:
        raise ctx.fail(f"{dtype} arithmetic in a T.Parallel body", "compute integers in int32: T.cast(x, 'int32') first, then cast back")
    return _emit_as(ctx, e, dst, dtype)


def _emit_as(ctx: ParallelDomain, e: Any, dst: str | None, dtype: str) -> Operand | None:
    """``e`` computed with int32 instructions (``dtype`` is int32) into ``dst`` or a new tile."""
    from tvm import tirx

    kind = type(e).__name__
    if kind in _ARITH:
        return _binary(ctx, _ARITH[kind], e.a, e.b, dtype, dst)
    if kind in _DIVISIONS:
        return _divide(ctx, e, *_DIVISIONS[kind], dst)
    op = op_name(e)
    if op in _BITWISE:
        return _binary(ctx, _BITWISE[op], e.args[0], e.args[1], dtype, dst)
    if op == "tirx.bitwise_not":
        return _binary(ctx, "bitwise_xor", e.args[0], tirx.IntImm(dtype, -1), dtype, dst)
    if op == "tirx.reinterpret":  # same width (integer_op): the value as int32, wrapped by the caller
        value = _operand(ctx, e.args[0], dtype)
        if not value.is_tile or dst is None:
            return value
        ctx.em.emit(f"tiu::move({dst}, {value.text});")
        return None
    return _shift(ctx, e.args[0], e.args[1], _SHIFTS[op], dtype, dst)


def _operand(ctx: ParallelDomain, e: Any, dtype: str) -> Operand:
    value = ctx.compute(e, None)
    assert value is not None
    if value.is_tile and value.dtype != dtype:
        out = ctx.temp(dtype)
        emit_convert(ctx.em, out, value.text, dtype, value.dtype, ctx.temp)
        return Operand(out, dtype, True)
    return value


def _binary(ctx: ParallelDomain, fn: str, a_e: Any, b_e: Any, dtype: str, dst: str | None) -> Operand | None:
    em = ctx.em
    a, b = _operand(ctx, a_e, dtype), _operand(ctx, b_e, dtype)
    out = ctx.output(dtype, dst)
    # add/sub take a shift, a rounding mode and saturation: no saturation (wrap, as C does).
    tail = ", 0, RM_HALF_UP, false" if fn in ("add", "sub", "mul") else ""
    if a.is_tile and b.is_tile:
        em.emit(f"tiu::{fn}({out}, {a.text}, {b.text}{tail});")
    elif a.is_tile:
        em.emit(f"tiu::{fn}({out}, {a.text}, (int)({b.text}){tail});")
    elif fn == "sub":
        em.emit(f"tiu::sub({out}, (int)({a.text}), {b.text}{tail});")
    else:  # commutative
        em.emit(f"tiu::{fn}({out}, {b.text}, (int)({a.text}){tail});")
    return None if out == dst else Operand(out, dtype, True)


def _shift(ctx: ParallelDomain, value_e: Any, amount_e: Any, sign: int, dtype: str, dst: str | None) -> Operand | None:
    em = ctx.em
    value = _operand(ctx, value_e, dtype)
    if not value.is_tile:
        filled = ctx.temp(dtype)
        em.emit(f"tiu::fill({filled}, (int)({value.text}));")
        value = Operand(filled, dtype, True)
    amount = _operand(ctx, amount_e, dtype)
    out = ctx.output(dtype, dst)
    if not amount.is_tile:
        em.emit(f"tiu::shift({out}, {value.text}, (int8_t)({'' if sign > 0 else '-'}({amount.text})), RM_DOWN);")
    else:
        signed = amount.text
        if sign < 0:
            signed = ctx.temp(dtype)
            em.emit(f"tiu::sub({signed}, 0, {amount.text}, 0, RM_HALF_UP, false);")
        narrow = ctx.temp("int8")
        em.emit(f"tiu::cast({narrow}, {signed});")  # shift amounts are small: exact in int8
        em.emit(f"tiu::shift({out}, {value.text}, {narrow}, RM_DOWN);")
    return None if out == dst else Operand(out, dtype, True)


def _divide(ctx: ParallelDomain, e: Any, rounding: str, part: str, dst: str | None) -> Operand | None:
    """``a // c``, ``a % c`` (floor) or C's ``a / c``, ``a % c`` (truncating) for a constant ``c > 0``.

    ``q = floor(fp32(a) * (1 / c))`` is within ``|a| * 2^-22 / c + 1`` of the true quotient;
    the remainder ``r = a - q * c`` is exact in int32 (its true value is small), and
    ``q += floor(fp32(r) * (1 / c))`` twice brings ``q`` to the floor quotient (the second
    step's remainder is below ``2^9 * c``, where fp32 is exact enough to be off by at most one
    step, which the last correction removes).  A truncating division then adds one where the
    remainder is non-zero and ``a`` negative.
    """
    from tvm import tirx

    em = ctx.em
    divisor = e.b
    if not isinstance(divisor, tirx.IntImm) or int(divisor.value) <= 0:
        raise ctx.fail(
            f"integer division by {divisor} in a T.Parallel body",
            "divide by a positive integer constant, or compute in float32 (T.cast(x, 'float32') / y) and cast back",
        )
    c = int(divisor.value)
    wrapped = wrapping_cast(e.a, ctx.em.analyzer) if rounding == "trunc" else None
    if wrapped is not None:
        raise ctx.fail(
            f"integer division or remainder {e} of {wrapped}, which may wrap (TVM may have rewritten a floor division "
            "of it as a truncating one, assuming it does not wrap)",
            "divide the value in int32 before narrowing it: T.cast(x // c, 'int8'), not T.cast(x, 'int8') // c",
        )
    a = _operand(ctx, e.a, "int32")
    if not a.is_tile:
        filled = ctx.temp("int32")
        em.emit(f"tiu::fill({filled}, (int)({a.text}));")
        a = Operand(filled, "int32", True)
    q, r, f, t = ctx.temp("int32"), ctx.temp("int32"), ctx.temp("float32"), ctx.temp("int32")
    inverse = f"{1.0 / c!r}f"
    em.emit(f"tiu::cast({f}, {a.text});")
    em.emit(f"tiu::fmul({f}, {f}, {inverse});")
    em.emit(f"tiu::cast({q}, {f}, RM_DOWN);")
    for _ in range(3):
        em.emit(f"tiu::mul({t}, {q}, {c}, 0, RM_HALF_UP, false);")
        em.emit(f"tiu::sub({r}, {a.text}, {t}, 0, RM_HALF_UP, false);")
        em.emit(f"tiu::cast({f}, {r});")
        em.emit(f"tiu::fmul({f}, {f}, {inverse});")
        em.emit(f"tiu::cast({t}, {f}, RM_DOWN);")
        em.emit(f"tiu::add({q}, {q}, {t}, 0, RM_HALF_UP, false);")
    # Exact fix-up: the floor remainder lies in [0, c).
    em.emit(f"tiu::mul({t}, {q}, {c}, 0, RM_HALF_UP, false);")
    em.emit(f"tiu::sub({r}, {a.text}, {t}, 0, RM_HALF_UP, false);")
    zero, one, minus, limit = em.fresh("zero"), em.fresh("one"), em.fresh("minus_one"), em.fresh("divisor_less")
    em.emit(f"int {zero} = 0;")
    em.emit(f"int {one} = 1;")
    em.emit(f"int {minus} = -1;")
    em.emit(f"int {limit} = {c - 1};")
    em.emit(f"tiu::lt_select({t}, {r}, {zero}, {minus}, {zero});")
    em.emit(f"tiu::gt_select({t}, {r}, {limit}, {one}, {t});")
    em.emit(f"tiu::add({q}, {q}, {t}, 0, RM_HALF_UP, false);")
    if rounding == "trunc":
        # C: round toward zero -- one more where the floor remainder is non-zero and a < 0.
        em.emit(f"tiu::mul({t}, {q}, {c}, 0, RM_HALF_UP, false);")
        em.emit(f"tiu::sub({r}, {a.text}, {t}, 0, RM_HALF_UP, false);")
        em.emit(f"tiu::gt_select({t}, {r}, {zero}, {one}, {zero});")
        sign = a.text
        if not is_plain(em, sign):  # the compare-selects take whole tiles: the emulator aborts on a sub-view
            sign = ctx.temp("int32")
            em.emit(f"tiu::move({sign}, {a.text});")
        em.emit(f"tiu::lt_select({t}, {sign}, {zero}, {t}, {zero});")
        em.emit(f"tiu::add({q}, {q}, {t}, 0, RM_HALF_UP, false);")
    out = ctx.output("int32", dst)
    if part == "div":
        em.emit(f"tiu::move({out}, {q});")
    else:
        em.emit(f"tiu::mul({t}, {q}, {c}, 0, RM_HALF_UP, false);")
        em.emit(f"tiu::sub({out}, {a.text}, {t}, 0, RM_HALF_UP, false);")
    return None if out == dst else Operand(out, "int32", True)
