"""Scalar C expressions: loop indices, tile offsets, conditions, scalar operands.

PPL kernels are C++; everything that is not a tile (block indices, offsets,
loop bounds, the constant of ``tiu::fadd(dst, src, C)``) is printed as a plain
C expression by :class:`ScalarPrinter`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from tilelang_tpu.codegen.ir import wrapping_cast

__all__ = ["HALF_DTYPES", "INFINITY", "HalfCast", "ScalarPrinter", "Unsupported", "lowest_finite", "round_to_half"]

#: 16-bit float dtypes: C ``float``s in scalar code, holding exactly a value of their type.
HALF_DTYPES = ("float16", "bfloat16")

#: ``cast(value, source dtype, destination dtype, guard)``: the C name of a float holding ``value``
#: (a C expression) rounded to the 16-bit destination, computed where ``guard`` (a C condition, or
#: ``""``) holds (codegen.emit.half_elements.half_cast).
HalfCast = Callable[[str, str, str, str], str]


class Unsupported(Exception):
    """An expression the scalar printer cannot express; the emitter turns it into
    a :class:`tilelang_tpu.codegen.TpuCodegenError` naming the statement."""


#: The largest finite value of each float dtype, as a C float literal.
_LARGEST = {"float32": "3.4028234663852886e38f", "float16": "65504.0f", "bfloat16": "3.38953139e38f"}

#: IEEE +inf as a C expression (PPL has no inf literal or builtin; the product overflows).
INFINITY = "(3.0e38f * 2.0f)"


def lowest_finite(dtype: str) -> str:
    """The most negative finite value of float ``dtype`` as a C literal."""
    return "-" + _LARGEST.get(dtype, _LARGEST["float32"])


def round_to_half(value: float, dtype: str) -> float:
    """``value`` rounded as torch's ``.to(dtype)`` rounds it: to fp32 first, then to fp16/bf16
    (round to nearest even, ±inf past the largest finite value)."""
    try:
        single = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:  # beyond fp32: inf in every 16-bit type too
        return float("inf") if value > 0 else float("-inf")
    if dtype == "float16":
        try:
            return float(struct.unpack("<e", struct.pack("<e", single))[0])
        except OverflowError:  # struct refuses what IEEE rounds to inf (|x| >= 65520)
            return float("inf") if single > 0 else float("-inf")
    bits = struct.unpack("<I", struct.pack("<f", single))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # bf16: the top half, rounded to nearest even
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def _float_literal(value: float, dtype: str) -> str:
    if value != value:
        raise Unsupported("NaN constant")
    if dtype in HALF_DTYPES:
        # TVM folds T.cast(257, "bfloat16") into a bfloat16 constant 257.0: the value its type holds is 256.
        value = round_to_half(value, dtype)
    if value in (float("inf"), float("-inf")):
        # A real infinity, as on every other target: a fill, select or store of T.infinity is
        # seen by the user (the largest finite value in its place was a wrong result).
        return INFINITY if value > 0 else f"(-{INFINITY})"
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


class ScalarPrinter:
    """Print TIR scalar expressions as C.

    ``names`` maps TIR ``Var`` objects to C identifiers; ``load`` is called for a
    ``BufferLoad`` (the emitter allows only scalar variables there); ``analyzer``
    proves the non-negativity that makes C's truncating ``/`` and ``%`` equal to
    TIR's floor division.
    """

    def __init__(self, names: dict[Any, str], analyzer: Any, load: Callable[[Any], str], half_cast: HalfCast) -> None:
        self.names = names
        self.analyzer = analyzer
        self.load = load
        self.half_cast = half_cast
        #: C conditions under which the sub-expression being printed is evaluated (the branches of
        #: ``?:``, the right side of ``&&``/``||``): a 16-bit cast computed ahead of its expression
        #: (:meth:`_cast`) is computed only where they hold.
        self.guards: list[str] = []

    def __call__(self, expr: Any) -> str:
        return self.print(expr)

    def _nonneg(self, *exprs: Any) -> bool:
        from tvm import tirx

        return all(self.analyzer.can_prove(tirx.GE(e, tirx.const(0, e.dtype))) for e in exprs)

    def _under(self, guard: str, e: Any) -> str:
        """``e`` printed as evaluated only where ``guard`` holds."""
        self.guards.append(guard)
        try:
            return self.print(e)
        finally:
            self.guards.pop()

    def print(self, e: Any) -> str:
        from tvm import tirx

        p = self.print
        if isinstance(e, tirx.IntImm):
            if e.dtype == "bool":
                return "true" if e.value else "false"
            return str(int(e.value))
        if isinstance(e, tirx.FloatImm):
            return _float_literal(float(e.value), str(e.dtype))
        if isinstance(e, tirx.Var):
            if e not in self.names:
                raise Unsupported(
                    f"variable {e.name} is not defined on the TPU (only block indices, loop variables and let-bound scalars are)"
                )
            return self.names[e]
        if isinstance(e, tirx.BufferLoad):
            return self.load(e)
        if _computes_on_unsigned(e):
            raise Unsupported(
                f"arithmetic, comparison or conversion of unsigned integers in scalar code ({e}): ppl-compile 1.30.2 "
                "has no scalar operation on uint8/uint16/uint32 values, only copies (hold such data in int32: "
                "T.copy into an int32 tile converts it)"
            )
        binary = {
            tirx.Add: "+",
            tirx.Sub: "-",
            tirx.Mul: "*",
            tirx.LT: "<",
            tirx.LE: "<=",
            tirx.GT: ">",
            tirx.GE: ">=",
            tirx.EQ: "==",
            tirx.NE: "!=",
        }
        for cls, op in binary.items():
            if isinstance(e, cls):
                return self._rounded(e, f"({p(e.a)} {op} {p(e.b)})")
        if isinstance(e, tirx.And):
            a = p(e.a)
            return f"({a} && {self._under(a, e.b)})"
        if isinstance(e, tirx.Or):
            a = p(e.a)
            return f"({a} || {self._under(f'!({a})', e.b)})"
        if isinstance(e, (tirx.Div, tirx.Mod)) and "int" in str(e.dtype) and wrapping_cast(e.a, self.analyzer) is not None:
            raise Unsupported(
                f"integer division or remainder {e} of a narrowing cast that may wrap (TVM may have rewritten a floor division as a truncating one)"
            )
        if isinstance(e, tirx.Div):
            return self._rounded(e, f"({p(e.a)} / {p(e.b)})")
        if isinstance(e, tirx.Mod) and "int" in str(e.dtype):
            return f"({p(e.a)} % {p(e.b)})"  # T.truncmod: C's % (the sign of the dividend)
        if isinstance(e, (tirx.FloorDiv, tirx.FloorMod)) and "int" not in str(e.dtype):
            raise Unsupported(f"floor division or remainder of {e.dtype} values ({e}) in scalar code")
        if isinstance(e, (tirx.FloorDiv, tirx.FloorMod)):
            if "int" in str(e.dtype) and not self._nonneg(e.a, e.b):
                raise Unsupported(f"floor division of possibly negative values ({e})")
            return f"({p(e.a)} {'/' if isinstance(e, tirx.FloorDiv) else '%'} {p(e.b)})"
        if isinstance(e, (tirx.Min, tirx.Max)):
            a, b = p(e.a), p(e.b)
            name = "min" if isinstance(e, tirx.Min) else "max"
            if "int" in str(e.dtype):
                return f"{name}({a}, {b})"
            # PPL declares only int min/max (ppl_func.h): a float argument would be truncated.
            # std::min/std::max's selection instead (both sides are pure).
            if name == "min":
                return f"(({b}) < ({a}) ? {_value(b, e.dtype)} : {_value(a, e.dtype)})"
            return f"(({a}) < ({b}) ? {_value(b, e.dtype)} : {_value(a, e.dtype)})"
        if isinstance(e, tirx.Not):
            return f"(!{p(e.a)})"
        if isinstance(e, tirx.Select):
            return self._choose(e.condition, e.true_value, e.false_value, e.dtype)
        if isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) in _BIT_OPS and "int" in str(e.dtype):
            # Simplify's strength reduction of division by a power of two: T.ceildiv(M, 64) of a
            # symbolic M becomes (M + 63) >> 6 (C's >> on int is the arithmetic shift TIR means).
            return f"({p(e.args[0])} {_BIT_OPS[str(e.op.name)]} {p(e.args[1])})"
        if isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) in _BOOL_OPS and str(e.dtype) == "bool":
            # ``c1 & c2``, ``c1 | c2`` of conditions (upstream's band masks): both sides evaluated,
            # as C's bitwise operators on bools do.
            return f"({p(e.args[0])} {_BOOL_OPS[str(e.op.name)]} {p(e.args[1])})"
        if isinstance(e, tirx.Cast):
            return self._cast(e)
        if isinstance(e, tirx.Call):
            called = self._call(e)
            if called is not None:
                return called
        raise Unsupported(f"scalar expression {type(e).__name__} ({e})")

    def _call(self, e: Any) -> str | None:
        """``T.if_then_else``, ``T.clamp`` and the float math functions PPL's scalar unit has
        (``ppl::exp``, ``log``, ``sqrt``, ``abs``...), or None for another call."""
        name = str(getattr(e.op, "name", ""))
        if name == "tirx.call_pure_extern" and str(e.args[0].value) in _EXTERN_MATH:
            name, args = _EXTERN_MATH[str(e.args[0].value)], list(e.args[1:])
        else:
            args = list(e.args)
        if name == "tirx.if_then_else" and len(args) == 3:
            # C's ?: evaluates only the chosen branch, as if_then_else means (a guarded load:
            # ``T.if_then_else(bx * 64 + i < M, A[bx * 64 + i, j], 0)``).
            return self._choose(args[0], args[1], args[2], e.dtype)
        if name == "tl.clamp" and len(args) == 3:
            return self._clamp(e, *args)
        function = _MATH.get(name)
        if function is None or str(e.dtype) not in _FLOATS or len(args) != 1:
            return None
        # The scalar unit computes in float; a 16-bit result is rounded once, as torch computes
        # fp16/bf16 math in float and rounds (codegen.emit.operands computes the tile forms so).
        return self._rounded(e, f"ppl::{function}((float)({self.print(args[0])}))")

    def _choose(self, condition: Any, if_true: Any, if_false: Any, dtype: Any) -> str:
        """A C ``?:`` (``T.Select``, ``T.if_then_else``): each branch printed under its condition
        and made a value of ``dtype`` (:func:`_value`)."""
        test = self.print(condition)
        chosen = _value(self._under(test, if_true), dtype)
        return f"({test} ? {chosen} : {_value(self._under(f'!({test})', if_false), dtype)})"

    def _clamp(self, e: Any, x: Any, lo: Any, hi: Any) -> str:
        """``T.clamp(x, lo, hi)`` as TileLang defines it, ``min(max(x, lo), hi)`` (``lo > hi``
        gives ``hi``); floats as ``torch.clamp`` (a NaN in ``x`` or a bound propagates)."""
        from tvm import tirx

        if "int" in str(e.dtype):
            return self.print(tirx.Min(tirx.Max(x, lo), hi))
        value, low, high = self.print(x), self.print(lo), self.print(hi)
        raised = f"(({low}) > ({value}) ? {_value(low, e.dtype)} : {_value(value, e.dtype)})"
        clamped = f"(({raised}) > ({high}) ? {_value(high, e.dtype)} : {_value(raised, e.dtype)})"
        # NaN + anything is NaN: a NaN bound gives NaN, as torch.clamp's does.
        nan_bound = f"(({low}) != ({low}) || ({high}) != ({high}))"
        return f"({nan_bound} ? (({low}) + ({high})) : {clamped})"

    def _rounded(self, e: Any, text: str) -> str:
        """``text``, the C ``float`` result of the arithmetic ``e`` on 16-bit values, rounded to ``e``'s
        16-bit type, as torch (and a GPU) rounds each fp16/bf16 operation: computed in float, then
        rounded.  Unrounded, bf16 ``a - b`` gave 221.5 where torch gives 222 and a cast to float32
        after it kept 221.5 (device differential run, seed 5018 #75).  Other dtypes are printed as
        they are."""
        if str(e.dtype) not in HALF_DTYPES:
            return text
        return self.half_cast(text, "float32", str(e.dtype), " && ".join(self.guards))

    def _cast(self, e: Any) -> str:
        from tvm import tirx

        dtype, source = str(e.dtype), str(e.value.dtype)
        ctype = _C_TYPES.get(dtype)
        if ctype is None:
            raise Unsupported(f"scalar cast to {dtype}")
        if dtype not in HALF_DTYPES or source == dtype:
            return f"(({ctype}){self.print(e.value)})"
        if isinstance(e.value, (tirx.IntImm, tirx.FloatImm)):
            return _float_literal(float(e.value.value), dtype)
        # fp16/bf16 scalars are C floats here, so the cast must round by itself (printed as a plain
        # (float) it kept every bit: int32 257 -> bf16 stayed 257, torch gives 256).  The TIU rounds
        # it, as torch does: C's (float) first (exact but for integers past 2^24), then to 16 bits.
        return self.half_cast(self.print(e.value), source, dtype, " && ".join(self.guards))


def _value(text: str, dtype: Any) -> str:
    """A branch ``text`` of a C ``?:`` as a value of ``dtype``'s C type, never a variable.

    ppl-compile 1.30.2 types a ``?:`` of two variables as a reference to them, so a ``?:`` one of
    whose branches is such a ``?:`` and the other a value failed to verify ("'arith.select' op
    failed to verify that all of {true_value, false_value, result} have same type") or crashed
    the compiler (SIGSEGV) -- nested float ``T.min``/``T.max`` in a ``T.serial`` loop (device
    differential run on f85a373).  A cast to the branch's own type is exact (no rounding, NaN and
    -0 kept) and makes it a value; nothing is hoisted out of the expression, so a loop condition
    or a guarded branch still evaluates it where it stands."""
    ctype = _C_TYPES.get(str(dtype))
    # Unsigned values are only ever copied in PPL scalar code (_computes_on_unsigned): no cast.
    return f"({text})" if ctype is None or str(dtype) in _UNSIGNED else f"(({ctype})({text}))"


#: Unsigned integer dtypes: ppl-compile 1.30.2 compiles copies of them in scalar code, no operation
#: (a compare, add, cast or xor of a ``ui32`` value fails: "must be signless-integer-like").
_UNSIGNED = ("uint8", "uint16", "uint32")


def _computes_on_unsigned(e: Any) -> bool:
    """Whether ``e`` computes on an unsigned value (a select of unsigned values only copies them)."""
    from tvm import tirx

    if isinstance(e, tirx.Cast):
        # Wrapping a signed integer into an unsigned type compiles (a select's scalar operand
        # ``T.cast(bx * BM + i, "uint8")`` ran before this check existed); reading one does not.
        source, dtype = str(e.value.dtype), str(e.dtype)
        return source != dtype and (source in _UNSIGNED or (dtype in _UNSIGNED and not source.startswith("int")))
    if isinstance(e, tirx.Select) or (isinstance(e, tirx.Call) and str(getattr(e.op, "name", "")) == "tirx.if_then_else"):
        return False
    operands = list(e.args) if isinstance(e, tirx.Call) else [getattr(e, "a", None), getattr(e, "b", None)]
    return any(o is not None and str(getattr(o, "dtype", "")) in _UNSIGNED for o in operands)


_C_TYPES = {
    "int32": "int",
    "int64": "long long",
    "int16": "short",
    "int8": "signed char",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "bool": "bool",
    "float32": "float",
    # fp16/bf16 scalars are C floats holding a value of their type (casts to them round: ScalarPrinter._cast).
    "float16": "float",
    "bfloat16": "float",
}

#: Float dtypes scalar math applies to (fp16/bf16 held in C floats, rounded after each function).
_FLOATS = ("float32", "float16", "bfloat16")

#: TIR math intrinsics -> the ``ppl::`` scalar function (ppl_func.h: ``float f(float)``).
#: ``round`` is left out (PPL's is C's, halves away from zero; TIR's rounds halves to even), and
#: ``trunc`` (ppl-compile 1.30.2 crashes: "'math.trunc' op unable to find printer").
_MATH = {
    "tirx.exp": "exp",
    "tirx.exp2": "exp2",
    "tirx.log": "log",
    "tirx.log2": "log2",
    "tirx.sqrt": "sqrt",
    "tirx.fabs": "abs",
    "tirx.floor": "floor",
    "tirx.ceil": "ceiling",
}

#: ``T.call_pure_extern`` names of C's float math (TileLang's ``T.exp`` of fp32 lowers to one)
#: -> the TIR intrinsic they mean.
_EXTERN_MATH = {
    "expf": "tirx.exp",
    "exp2f": "tirx.exp2",
    "logf": "tirx.log",
    "log2f": "tirx.log2",
    "sqrtf": "tirx.sqrt",
    "fabsf": "tirx.fabs",
    "floorf": "tirx.floor",
    "ceilf": "tirx.ceil",
}

#: Bitwise operations of two bools (conditions written with ``&``, ``|``, ``^``), and their C operators.
_BOOL_OPS = {"tirx.bitwise_and": "&", "tirx.bitwise_or": "|", "tirx.bitwise_xor": "^"}

#: Integer bit operations TIR's simplifier produces, and their C operators.
_BIT_OPS = {
    "tirx.shift_right": ">>",
    "tirx.shift_left": "<<",
    "tirx.bitwise_and": "&",
    "tirx.bitwise_or": "|",
    "tirx.bitwise_xor": "^",
}
