"""The values the PPL code generator passes around: the error, C identifiers, and the
records of local tiles, global tensors and element-wise operands (no TIR queries, no emission)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tilelang_tpu.codegen.layout import to4

__all__ = [
    "GLOBAL_SCOPES",
    "LOCAL_SCOPES",
    "RESERVED",
    "CodegenError",
    "GlobalTensor",
    "Namer",
    "Operand",
    "Tile",
]


class CodegenError(Exception):
    """Raised for a construct the tpu codegen does not support (wrapped by :func:`tilelang_tpu.codegen.generate`)."""

    def __init__(self, construct: str, where: str, hint: str = "") -> None:
        self.construct = construct
        self.where = where
        self.hint = hint
        super().__init__(construct)


GLOBAL_SCOPES = ("global",)
LOCAL_SCOPES = ("shared", "shared.dyn", "local.fragment", "local")


@dataclass
class Namer:
    """Unique C identifiers for one kernel, and the C name given to each TIR variable."""

    of_var: dict[Any, str] = field(default_factory=dict)  # TIR var -> C identifier
    used: set[str] = field(default_factory=set)
    counter: int = 0

    def reserve(self, name: str) -> None:
        self.used.add(name)

    def fresh(self, base: str) -> str:
        """A new identifier like ``base`` (sanitised; suffixed when taken or reserved by C/PPL)."""
        base = re.sub(r"\W", "_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
        name = base
        while name in self.used or name in RESERVED:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.used.add(name)
        return name


@dataclass
class Tile:
    """A local tensor: its C name, element dtype, TileLang shape and PPL block."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    block: list[str]
    layout: str = "lanes"

    @property
    def shape4(self) -> list[str]:
        return to4([str(s) for s in self.shape], self.layout)


@dataclass
class GlobalTensor:
    """A kernel's tensor parameter: its gtensor's C name, element dtype and dimensions.

    ``dims`` holds an ``int`` per static dimension and the device function's TIR ``Var``
    per symbolic one (``T.symbolic``/``T.dynamic``), whose value the entry receives as an
    ``int`` parameter (:class:`tilelang_tpu.abi.ShapeSlot`).  Code that handles symbolic
    dimensions reads :meth:`extent`; :attr:`shape` is for code that needs static sizes
    and refuses a symbolic tensor by name, so no construct can mistake a symbol for a size.
    """

    name: str
    dtype: str
    dims: tuple[Any, ...]
    tensor: str = ""  #: the parameter's name in the user's kernel (for messages)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """The static shape; a :class:`CodegenError` for a tensor with a symbolic dimension."""
        if not self.is_static:
            raise CodegenError(
                f"tensor {self.tensor or self.name}[{', '.join(str(d) for d in self.dims)}], which has symbolic dimensions, "
                "in a construct that needs static shapes",
                "",
                "give the tensor a static shape, or use it only through T.copy (which clips to the runtime size)",
            )
        return tuple(int(d) for d in self.dims)

    def extent(self, axis: int) -> Any:
        """Dimension ``axis`` as a TIR expression (an ``int32`` constant or the shape variable)."""
        from tvm import tirx

        dim = self.dims[axis]
        return tirx.const(dim, "int32") if isinstance(dim, int) else dim


@dataclass
class Operand:
    """A value inside an element-wise expression: a tile view or a C scalar."""

    text: str
    dtype: str
    is_tile: bool


RESERVED = {
    *("ppl", "tiu", "dma", "dim4", "tensor", "gtensor", "GLOBAL", "make_tensor", "quick_pooling", "fexp", "min", "max", "align", "div_up"),
    *("fp32", "fp16", "bf16", "int8", "int16", "int32", "uint8", "uint16", "uint32"),
    *("auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete", "do", "double", "else"),
    *("enum", "false", "float", "for", "if", "int", "long", "namespace", "new", "return", "short", "signed", "sizeof"),
    *("static", "struct", "switch", "template", "this", "true", "typedef", "union", "unsigned", "using", "void", "while"),
}
