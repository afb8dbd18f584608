"""The expressions of a ``T.Parallel`` assignment, compiled to tile operations over its
domain: scalars, casts, binary arithmetic, element-wise functions and selects, over the
tile reads of :mod:`.tile_reads`."""

from __future__ import annotations

import math
from typing import Any

from tilelang_tpu.codegen.emit.cast import CONVERT_DTYPES, emit_convert, is_plain
from tilelang_tpu.codegen.emit.domain import ParallelDomain
from tilelang_tpu.codegen.emit.integers import emit_integer, integer_op, loop_index
from tilelang_tpu.codegen.emit.ops import UNARY_EXTERN, UNARY_OPS, WRAPPERS, constant_scale
from tilelang_tpu.codegen.emit.select import emit_select
from tilelang_tpu.codegen.emit.tile_reads import read_tile
from tilelang_tpu.codegen.ir import as_float, op_name
from tilelang_tpu.codegen.layout import FLOAT_DTYPES
from tilelang_tpu.codegen.ranges import DIVISOR_RANGE, expr_range, reciprocal_sqrt, safe_divisor
from tilelang_tpu.codegen.values import Operand

__all__ = ["ParallelBody"]

#: Below this, T.sqrt's argument is scaled by 2^64 first (``tiu::fsqrt`` is wrong below 2^-125).
_SQRT_SMALL = 2.0**-100

#: Float dtypes with fp32's exponent range, where ``tiu::fdiv`` needs its divisor rescaled.
_WIDE_RANGE = ("float32", "bfloat16")

#: ``ln`` of each dtype's largest finite value: ``fexp`` of more must be +inf.
_EXP_LIMIT = {"float32": 88.72284, "float16": 11.0898, "bfloat16": 88.7167}


def _exp_may_overflow(fn: str, arg: Any, dtype: str, before: Any) -> bool:
    """Whether ``T.exp(arg)`` (``T.exp2``) needs its overflow fix-up: ``arg``'s range, from the
    statements ``before`` (codegen.ranges), is unknown or ends above ``ln(max)`` (``log2(max)``)."""
    values = expr_range(arg, before)
    per_unit = 1.0 if fn == "exp" else math.log(2.0)  # exp2's argument, in natural units
    return values is None or values.hi * per_unit > _EXP_LIMIT[dtype]


#: Largest finite value of each float dtype: above it is +inf, where ``tiu::fsqrt`` gives NaN.
_FINITE_MAX = {"float32": 3.4028234663852886e38, "float16": 65504.0, "bfloat16": 3.3895313892515355e38}


class ParallelBody(ParallelDomain):
    """Compiles one ``T.Parallel`` assignment into tile ops over the loop domain."""

    def compute(self, e: Any, dst: str | None) -> Operand | None:
        """Compute ``e``; write it into ``dst`` when given (returns None), else return an operand."""
        from tvm import tirx

        em = self.em
        if not self.uses_loop_vars(e):
            return Operand(em.expr(e), str(e.dtype), False)
        if isinstance(e, tirx.BufferLoad):
            return self.load(e)
        if isinstance(e, tirx.Var):
            return loop_index(self, e)  # uses_loop_vars: a T.Parallel variable used as a value
        if isinstance(e, tirx.Let):  # pure: the bound value, substituted where it is used
            return self.compute(tirx.stmt_functor.substitute(e.body, {e.var: e.value}), dst)
        if isinstance(e, tirx.Select):  # both sides are pure: the same as T.if_then_else
            return self.compute(tirx.if_then_else(e.condition, e.true_value, e.false_value), dst)
        if isinstance(e, tirx.Cast):
            src = self.compute(e.value, None)
            assert src is not None and src.is_tile
            dtype = str(e.dtype)
            if dtype not in CONVERT_DTYPES or src.dtype not in CONVERT_DTYPES:
                raise self.fail(
                    f"cast {src.dtype} -> {dtype} in a T.Parallel body", f"casts between {', '.join(CONVERT_DTYPES)} are supported"
                )
            if dtype == src.dtype:
                return src
            out = self.output(dtype, dst)
            emit_convert(em, out, src.text, dtype, src.dtype, self.temp)
            return None if out == dst else Operand(out, dtype, True)
        if integer_op(e):
            return emit_integer(self, e, dst)
        if any(e.same_as(safe) for safe in em.safe_rsqrts):
            # T.rsqrt(x), lowered to 1 / sqrt(x), where x is proven in frsqrt's accurate range (codegen.ranges)
            return self.unary("frsqrt", e, dst, reciprocal_sqrt(e))
        binary = {tirx.Add: "fadd", tirx.Sub: "fsub", tirx.Mul: "fmul", tirx.Div: "fdiv", tirx.Max: "fmax", tirx.Min: "fmin"}
        if isinstance(e, tirx.Div) and str(e.dtype) in _WIDE_RANGE and not safe_divisor(e.b, em.before):
            return self.divide(e, dst)
        for cls, fn in binary.items():
            if isinstance(e, cls):
                return self.binary(fn, e, dst)
        if isinstance(e, tirx.Call) and op_name(e) == "tirx.if_then_else":
            return emit_select(self, e, dst)
        if isinstance(e, tirx.Call) and op_name(e) == "tl.clamp" and len(e.args) == 3:
            return self.compute(_clamp(*e.args), dst)
        if isinstance(e, tirx.Call):
            op = op_name(e)
            unary = UNARY_OPS.get(op)
            args = list(e.args)
            if op in ("tirx.call_pure_extern", "tirx.call_extern") and args and isinstance(args[0], tirx.StringImm):
                # tilelang's device preparation (LowerIntrin) has turned T.exp into expf(...) etc.
                op = str(args[0].value)
                unary = UNARY_EXTERN.get(op)
                args = args[1:]
            if unary == "erf" and len(args) == 1:
                return self.erf(e, dst, args[0])
            if unary == "fsqrt" and len(args) == 1:
                return self.sqrt(e, dst, args[0])
            if unary is not None and len(args) == 1:
                return self.unary(unary, e, dst, args[0])
            raise self.fail(
                f"call to {op} in a T.Parallel body",
                "supported element-wise functions: exp, exp2, log, log2, tanh and sigmoid (fp32), abs, sqrt, rsqrt",
            )
        raise self.fail(
            f"{type(e).__name__} in a T.Parallel body ({e})",
            "supported: + - * / max min, exp, abs, sqrt, rsqrt, casts, tile loads and scalars",
        )

    def binary(self, fn: str, e: Any, dst: str | None) -> Operand | None:
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"{dtype} arithmetic in a T.Parallel body", "tile arithmetic is supported for fp32, fp16 and bf16")
        a = self.compute(e.a, None)
        b = self.compute(e.b, None)
        assert a is not None and b is not None
        if fn == "fdiv" and dtype in _HALF:
            # PPL's 16-bit fdiv is off by up to one ulp (bf16 0.5977 for 0.6016); in fp32, rounded
            # once, it is what torch and the c target compute (fp32 has >= 2p + 2 bits: no double rounding).
            wide_a, wide_b = self.widened(a), self.widened(b)
            wide = self.temp("float32")
            self.emit_binary(fn, wide, wide_a, wide_b)
            return self.narrowed(wide, dtype, dst)
        out = self.output(dtype, dst)
        self.emit_binary(fn, out, a, b)
        return None if out == dst else Operand(out, dtype, True)

    def emit_binary(self, fn: str, out: str, a: Operand, b: Operand) -> None:
        em = self.em
        if a.is_tile and b.is_tile:
            em.emit(f"tiu::{fn}({out}, {a.text}, {b.text});")
        elif a.is_tile:
            em.emit(f"tiu::{fn}({out}, {a.text}, {as_float(b.text)});")
        elif fn in ("fadd", "fmul", "fmax", "fmin"):
            em.emit(f"tiu::{fn}({out}, {b.text}, {as_float(a.text)});")
        else:  # scalar - tile, scalar / tile
            em.emit(f"tiu::{fn}({out}, {as_float(a.text)}, {b.text});")

    def widened(self, x: Operand) -> Operand:
        """A 16-bit tile operand converted (exactly) to a new fp32 tile; scalars stay as they are."""
        if not x.is_tile or x.dtype == "float32":
            return x
        wide = self.temp("float32")
        emit_convert(self.em, wide, x.text, "float32", x.dtype, self.temp)
        return Operand(wide, "float32", True)

    def narrowed(self, wide: str, dtype: str, dst: str | None) -> Operand | None:
        """The fp32 tile ``wide`` rounded once to ``dtype`` (into ``dst`` when it has that dtype)."""
        out = self.output(dtype, dst)
        emit_convert(self.em, out, wide, dtype, "float32", self.temp)
        return None if out == dst else Operand(out, dtype, True)

    def unary(self, fn: str, e: Any, dst: str | None, arg: Any) -> Operand | None:
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"{fn} of {dtype} in a T.Parallel body", "fp32, fp16 and bf16 are supported")
        through_fp32 = dtype in _HALF and fn in _THROUGH_FP32
        work = "float32" if through_fp32 else dtype
        overflow = fn in ("exp", "exp2") and _exp_may_overflow(fn, arg, work, self.em.before)
        scale = 1.0
        if fn in WRAPPERS and WRAPPERS[fn][1] is not None:
            # exp2(x * c) multiplies the tile once, by c * ln 2, instead of by c and then by ln 2.
            arg, scale = constant_scale(arg)
        src = self.compute(arg, None)
        assert src is not None
        if through_fp32:
            # PPL computes these in fp16/bf16 one ulp off (fp16 sqrt(3): 1.7314 for 1.7324);
            # torch and the c target compute them in fp32 and round once: so do we.
            wide = self.temp("float32")
            self.emit_unary(fn, wide, self.widened(src).text, "float32", scale, overflow)
            return self.narrowed(wide, dtype, dst)
        out = self.output(dtype, dst)
        self.emit_unary(fn, out, src.text, dtype, scale, overflow)
        return None if out == dst else Operand(out, dtype, True)

    def emit_unary(self, fn: str, out: str, src: str, dtype: str, scale: float, overflow: bool) -> None:
        em = self.em
        if fn in WRAPPERS:
            # PPL's wrapper functions (ppl_wrapper_func.h) take the block and real shapes.
            wrapper, pre, post, dtypes = WRAPPERS[fn]
            if dtype not in dtypes:
                raise self.fail(f"T.{fn} of {dtype} in a T.Parallel body", f"PPL has it for {', '.join(dtypes)}; cast to float32 first")
            block = self.temp_block()
            operand = src
            if pre is not None:  # exp2(x) = exp(x * ln 2)
                operand = self.temp(dtype)
                em.emit(f"tiu::fmul({operand}, {src}, {pre * scale!r}f);")
            if overflow and not is_plain(em, operand):  # the compare-selects take whole tiles
                whole = self.temp(dtype)
                em.emit(f"tiu::move({whole}, {operand});")
                operand = whole
            direct = post is None and (not overflow or (is_plain(em, out) and out != operand))
            target = out if direct else self.temp(dtype)
            em.emit(f"{wrapper}({target}, {operand}, &{block}, &{block});")
            if overflow:
                # fexp is finite garbage above ln(max) (exp(89) = 2.2e38, exp(inf) = NaN): +inf there.
                limit, inf = em.fresh("exp_max"), em.fresh("exp_inf")
                em.emit(f"float {limit} = {_EXP_LIMIT[dtype]!r}f;")
                em.emit(f"float {inf} = 3.0e38f * 2.0f;")  # no inf literal or builtin in PPL
                em.emit(f"tiu::gt_select({target}, {operand}, {limit}, {inf}, {target});")
            if post is not None:  # log2(x) = log(x) / ln 2
                em.emit(f"tiu::fmul({out}, {target}, {post!r}f);")
            elif target != out:
                em.emit(f"tiu::move({out}, {target});")
        else:
            em.emit(f"tiu::{fn}({out}, {src});")

    def divide(self, e: Any, dst: str | None) -> Operand | None:
        """``a / b`` (fp32, bf16) for a divisor not proven within
        :data:`~tilelang_tpu.codegen.ranges.DIVISOR_RANGE`: ``tiu::fdiv`` is ±inf for
        ``|b| < 2^-125`` and 0 for ``|b| >= 2^126`` (its reciprocal leaves the normal range), so
        both operands are first multiplied by ``f = 2^64`` (``|b| < 2^-100``) or ``2^-64``
        (``|b| > 2^100``), else 1: exact, the quotient unchanged.  (Where ``a * f`` overflows or
        flushes, ``a / b`` itself is beyond 2^164 or below 2^-162: inf or 0 either way.)"""
        em = self.em
        dtype = str(e.dtype)
        a = self.compute(e.a, None)
        b = self.compute(e.b, None)
        assert a is not None and b is not None
        if not b.is_tile:  # a scalar divisor: the plain division (values scalars can hold are its business)
            return self.binary("fdiv", e, dst)
        half = dtype in _HALF
        if half:  # PPL's 16-bit fdiv is up to one ulp off: in fp32, rounded once (see binary)
            a, b = self.widened(a), self.widened(b)
        work = "float32" if half else dtype
        low, high = DIVISOR_RANGE
        size, factor = self.temp(work), self.temp(work)
        names = [em.fresh(n) for n in ("rescale_low", "rescale_high", "rescale_up", "rescale_down", "rescale_one")]
        for name, value in zip(names, (low, high, 2.0**64, 2.0**-64, 1.0), strict=True):
            em.emit(f"float {name} = {value!r}f;")
        em.emit(f"tiu::fabs({size}, {b.text});")
        if work == "float32":
            em.emit(f"tiu::lt_select({factor}, {size}, {names[0]}, {names[2]}, {names[4]});")
        else:  # two scalar choices are fp32 there: "dst and src2/src3 operands should be same type"
            em.emit(f"tiu::fill({factor}, {names[4]});")
            em.emit(f"tiu::lt_select({factor}, {size}, {names[0]}, {names[2]}, {factor});")
        em.emit(f"tiu::gt_select({factor}, {size}, {names[1]}, {names[3]}, {factor});")
        em.emit(f"tiu::fmul({size}, {b.text}, {factor});")  # the divisor, scaled
        if a.is_tile:
            em.emit(f"tiu::fmul({factor}, {a.text}, {factor});")
        else:
            em.emit(f"tiu::fmul({factor}, {factor}, {as_float(a.text)});")
        if half:
            wide = self.temp("float32")
            em.emit(f"tiu::fdiv({wide}, {factor}, {size});")
            return self.narrowed(wide, dtype, dst)
        out = self.output(dtype, dst)
        em.emit(f"tiu::fdiv({out}, {factor}, {size});")
        return None if out == dst else Operand(out, dtype, True)

    def sqrt(self, e: Any, dst: str | None, arg: Any) -> Operand | None:
        """``T.sqrt(x)`` as ``tiu::fsqrt`` with two fix-ups, each left out where
        :func:`~tilelang_tpu.codegen.ranges.expr_range` proves it needless.  ``fsqrt`` is
        ``x * frsqrt(x)`` (measured on the BM1690 emulator): NaN for ``x = +inf`` (``inf * 0``),
        and 3x too large for fp32/bf16 ``x`` below 2^-125, where ``frsqrt`` is wrong.  So
        ``x > max`` selects ``x`` (+inf), and ``x < 2^-100`` takes ``sqrt(x * 2^64) * 2^-32``
        (exact scalings; fp16's smallest normal, 2^-14, is in ``frsqrt``'s accurate range)."""
        em = self.em
        dtype = str(e.dtype)
        if dtype not in FLOAT_DTYPES:
            raise self.fail(f"fsqrt of {dtype} in a T.Parallel body", "fp32, fp16 and bf16 are supported")
        values = expr_range(arg, em.before)
        small = dtype != "float16" and (values is None or values.lo < _SQRT_SMALL)
        infinite = values is None or values.hi > _FINITE_MAX[dtype]
        x = self.compute(arg, None)
        assert x is not None
        half = dtype in _HALF
        if half:  # PPL's 16-bit fsqrt is up to one ulp off: in fp32, rounded once (see unary)
            x = self.widened(x)
        work = "float32" if half else dtype
        if not small and not infinite:
            if half:
                wide = self.temp("float32")
                em.emit(f"tiu::fsqrt({wide}, {x.text});")
                return self.narrowed(wide, dtype, dst)
            out = self.output(dtype, dst)
            em.emit(f"tiu::fsqrt({out}, {x.text});")
            return None if out == dst else Operand(out, dtype, True)
        if not is_plain(em, x.text):  # the compare-selects below take whole tiles
            whole = self.temp(work)
            em.emit(f"tiu::move({whole}, {x.text});")
            x = Operand(whole, work, True)
        root = self.temp(work)
        if small:
            scaled, limit = self.temp(work), em.fresh("sqrt_small")
            em.emit(f"float {limit} = {_SQRT_SMALL!r}f;")
            em.emit(f"tiu::fmul({scaled}, {x.text}, {2.0**64!r}f);")
            em.emit(f"tiu::lt_select({scaled}, {x.text}, {limit}, {scaled}, {x.text});")
            em.emit(f"tiu::fsqrt({root}, {scaled});")
            em.emit(f"tiu::fmul({scaled}, {root}, {2.0**-32!r}f);")
            em.emit(f"tiu::lt_select({root}, {x.text}, {limit}, {scaled}, {root});")
        else:
            em.emit(f"tiu::fsqrt({root}, {x.text});")
        if infinite:
            limit = em.fresh("sqrt_max")
            em.emit(f"float {limit} = {_FINITE_MAX[work]!r}f;")
            em.emit(f"tiu::gt_select({root}, {x.text}, {limit}, {x.text}, {root});")  # +inf stays +inf
        if half:
            return self.narrowed(root, dtype, dst)
        if dst is not None and self.dst_tile.dtype == dtype:
            em.emit(f"tiu::move({dst}, {root});")
            return None
        return Operand(root, dtype, True)

    def erf(self, e: Any, dst: str | None, arg: Any) -> Operand | None:
        """``T.erf(x)`` in fp32 by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
        ``1 - (a1 t + ... + a5 t^5) exp(-x^2)`` with ``t = 1 / (1 + p |x|)``, its sign restored.
        (PPL's ``ferf`` wrapper is off by up to 2e-2 on the emulator.)"""
        em = self.em
        if str(e.dtype) != "float32":
            raise self.fail(f"T.erf of {e.dtype} in a T.Parallel body", "compute it in float32: T.erf(T.cast(x, 'float32'))")
        x = self.compute(arg, None)
        assert x is not None and x.is_tile
        if not is_plain(em, x.text):  # the compare-select below takes whole tiles
            whole = self.temp("float32")
            em.emit(f"tiu::move({whole}, {x.text});")
            x = Operand(whole, "float32", True)
        t, u, poly = self.temp("float32"), self.temp("float32"), self.temp("float32")
        em.emit(f"tiu::fabs({t}, {x.text});")
        em.emit(f"tiu::fmul({t}, {t}, {_ERF_P!r}f);")
        em.emit(f"tiu::fadd({t}, {t}, 1.0f);")
        em.emit(f"tiu::fdiv({t}, 1.0f, {t});")
        em.emit(f"tiu::fmul({poly}, {t}, {_ERF_A[-1]!r}f);")
        for a in reversed(_ERF_A[:-1]):
            em.emit(f"tiu::fadd({poly}, {poly}, {a!r}f);")
            em.emit(f"tiu::fmul({poly}, {poly}, {t});")
        em.emit(f"tiu::fmul({u}, {x.text}, {x.text});")
        em.emit(f"tiu::fmul({u}, {u}, -1.0f);")
        block = self.temp_block()
        em.emit(f"fexp({t}, {u}, &{block}, &{block});")
        em.emit(f"tiu::fmul({poly}, {poly}, {t});")
        em.emit(f"tiu::fsub({poly}, 1.0f, {poly});")  # erf(|x|)
        em.emit(f"tiu::fmul({u}, {poly}, -1.0f);")
        zero = em.fresh("zero")
        em.emit(f"float {zero} = 0.0f;")
        em.emit(f"tiu::gt_select({t}, {x.text}, {zero}, {poly}, {u});")
        out = self.output("float32", dst)
        em.emit(f"tiu::move({out}, {t});")
        return None if out == dst else Operand(out, "float32", True)

    def load(self, e: Any) -> Operand:
        """A tile read over the domain (:func:`~tilelang_tpu.codegen.emit.tile_reads.read_tile`)."""
        return read_tile(self, e)


_HALF = ("float16", "bfloat16")
#: Functions whose 16-bit PPL forms are up to one ulp off: computed in fp32 and rounded once.
_THROUGH_FP32 = ("fsqrt", "frsqrt", "exp", "exp2", "log", "log2")

#: Abramowitz and Stegun 7.1.26: erf(x) = 1 - (a1 t + a2 t^2 + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p x).
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _clamp(x: Any, lo: Any, hi: Any) -> Any:
    """``T.clamp(x, lo, hi)`` as TileLang defines it: ``min(max(x, lo), hi)``, NaN propagating.
    Integers as that; floats as two IEEE compare-selects (``lo > x ? lo : x``, then ``> hi``)."""
    from tvm import tirx

    if "int" in str(x.dtype):
        return tirx.Min(tirx.Max(x, lo), hi)
    low = tirx.if_then_else(lo > x, lo, x)
    return tirx.if_then_else(low > hi, hi, low)
