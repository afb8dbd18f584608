"""The element-wise functions of ``T.Parallel`` bodies: the TIR ops and C externs that
name them, the PPL instruction or wrapper function computing each, and the constant-scale
fold of ``exp2(x * c)``."""

from __future__ import annotations

from typing import Any

__all__ = ["UNARY_EXTERN", "UNARY_OPS", "WRAPPERS", "constant_scale"]


def constant_scale(e: Any) -> tuple[Any, float]:
    """``(x, c)`` with ``e == x * c`` for a float constant ``c`` (``(e, 1.0)`` if there is none).

    Recognises ``x * c``, ``c * x`` and ``a * c +/- b * c`` (upstream's attention writes
    ``T.exp2(s * scale - m * scale)``), which becomes ``(a +/- b) * c``: one tile
    operation less, and no less accurate.
    """
    from tvm import tirx

    def split(m: Any) -> tuple[Any, float] | None:
        if isinstance(m, tirx.Mul):
            if isinstance(m.b, tirx.FloatImm):
                return m.a, float(m.b.value)
            if isinstance(m.a, tirx.FloatImm):
                return m.b, float(m.a.value)
        return None

    scaled = split(e)
    if scaled is not None:
        return scaled
    if isinstance(e, (tirx.Add, tirx.Sub)):
        a, b = split(e.a), split(e.b)
        if a is not None and b is not None and a[1] == b[1]:
            return type(e)(a[0], b[0]), a[1]
    return e, 1.0


UNARY_OPS = {
    "tirx.exp": "exp",
    "tirx.exp2": "exp2",
    "tirx.log": "log",
    "tirx.log2": "log2",
    "tirx.tanh": "tanh",
    "tirx.sigmoid": "sigmoid",
    "tirx.fabs": "fabs",
    "tirx.sqrt": "fsqrt",
    "tirx.rsqrt": "frsqrt",
}

_LN2 = 0.6931471805599453
_ALL_FLOATS = ("float32", "float16", "bfloat16")

#: Functions computed by PPL wrapper functions: name -> (wrapper, multiply the input by,
#: multiply the result by, dtypes the wrapper supports).
WRAPPERS: dict[str, tuple[str, float | None, float | None, tuple[str, ...]]] = {
    "exp": ("fexp", None, None, _ALL_FLOATS),  # range-reduced: clamps, splits into 2^k * e^r
    "exp2": ("fexp", _LN2, None, _ALL_FLOATS),
    "log": ("flog", None, None, _ALL_FLOATS),
    "log2": ("flog", None, 1.0 / _LN2, _ALL_FLOATS),
    "tanh": ("tanh_fp32", None, None, ("float32",)),
    "sigmoid": ("sigmoid_fp32", None, None, ("float32",)),
}
UNARY_EXTERN = {
    "expf": "exp",
    "exp": "exp",
    "__expf": "exp",
    "hexp": "exp",
    "exp2f": "exp2",
    "exp2": "exp2",
    "__exp2f": "exp2",
    "hexp2": "exp2",
    "logf": "log",
    "log": "log",
    "__logf": "log",
    "hlog": "log",
    "log2f": "log2",
    "log2": "log2",
    "__log2f": "log2",
    "hlog2": "log2",
    "tanhf": "tanh",
    "tanh": "tanh",
    "htanh": "tanh",
    "fabsf": "fabs",
    "fabs": "fabs",
    "__habs": "fabs",
    "sqrtf": "fsqrt",
    "sqrt": "fsqrt",
    "hsqrt": "fsqrt",
    "rsqrtf": "frsqrt",
    "rsqrt": "frsqrt",
    "hrsqrt": "frsqrt",
}
