"""The kernel ABI shared by the PPL code generator and the runtime.

This module is the single place where the contract between generated PPL source
and the host launcher is written down:

* The generated PPL source defines exactly one kernel function::

      __KERNEL__ void <entry_name(name)>(T0 *ptr_0, T1 *ptr_1, ...)

  whose parameters are the TileLang kernel's tensor parameters **in the order the
  user declared them, unused ones included** (``ptr_i`` is the i-th declared
  tensor), because that is the order in which the runtime passes the tensors.
  ``name`` is the user's prim_func name (the host function's symbol), not the
  device function's.  Each parameter is a pointer to global (device) memory whose
  element type is ``PPL_DTYPES[tensor.dtype]``.  A scalar parameter
  (``alpha: T.float32``, ``n: T.int32``) is passed by value in its declared slot
  as a C ``float`` or ``int`` (``SCALAR_TYPES``).  Static dimensions are baked into
  the source.  Each symbolic dimension (``M = T.symbolic("M")`` in a
  ``T.Tensor((M, N), ...)``) adds one by-value ``int`` parameter *after* the declared
  parameters, one per distinct variable, in the order :func:`shape_symbols` gives
  (first appearance in the declared tensors' shapes, declared order, outermost dim
  first); the runtime reads its value from the tensors at each call.

  tilelang's ``SplitHostDevice`` gives the device function its own parameter
  list: sorted by name and without the tensors its body never touches.  The
  lowering therefore records the declared parameters on the device function
  (``DECLARED_PARAMS_ATTR``, ``KERNEL_NAME_ATTR``) and :func:`bind_pointers` maps
  each device parameter to its declared slot *by identity* (a device parameter is
  the very data variable of a declared buffer), never by position.

* ``ppl-compile`` turns that function into device C with a packed-argument entry
  ``int <entry>_entry(const void *args)``; ``args`` points to a struct of N
  fields in the same order: an unsigned 64-bit device address per tensor
  (``ENTRY_ARG_CTYPE`` below) and the scalar's C type per scalar, laid out with
  natural C alignment (ppl-compile's ``tpu_kernel_api_<entry>_t``).  The runtime
  builds that struct (:func:`entry_arguments`) and launches the ``<entry>_entry``
  symbol (``launch_symbol``).

* The entry-name rule (``<name>_kernel`` unless the name already ends with
  ``_kernel``) is the one used by the SophGo TileLang fork; it lives only here.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "DECLARED_PARAMS_ATTR",
    "ENTRY_ARG_CTYPE",
    "KERNEL_NAME_ATTR",
    "PPL_DTYPES",
    "SCALAR_TYPES",
    "SHAPE_CTYPE",
    "SHAPE_DTYPE",
    "SHAPE_MAX",
    "SHAPE_VARS_ATTR",
    "AbiError",
    "PointerSlot",
    "ScalarSlot",
    "ShapeSlot",
    "bind_pointers",
    "entry_arguments",
    "entry_name",
    "launch_symbol",
    "ppl_dtype",
    "shape_symbols",
    "slot_ctypes",
]

#: Suffix the fork appends to kernel function names.
_KERNEL_SUFFIX = "_kernel"

#: Suffix ppl-compile gives the packed-argument wrapper of a ``__KERNEL__`` function.
_ENTRY_SUFFIX = "_entry"

#: Device-function attribute (set by the lowering): the user's parameters in declared
#: order, each a TIR ``Buffer`` (tensor) or ``Var`` (scalar).
DECLARED_PARAMS_ATTR = "tilelang_tpu.declared_params"

#: Device-function attribute (set by the lowering): the user's prim_func name.
KERNEL_NAME_ATTR = "tilelang_tpu.kernel_name"

#: Device-function attribute (set by the lowering): the symbolic dimension variables of
#: the declared tensors, in :func:`shape_symbols` order, each the device function's own
#: ``Var`` (the host's, if the body never reads it).
SHAPE_VARS_ATTR = "tilelang_tpu.shape_vars"

#: C type, TIR dtype and largest value of the entry parameter of a symbolic dimension.
SHAPE_CTYPE = "int"
SHAPE_DTYPE = "int32"
SHAPE_MAX = 2**31 - 1

#: C type of one slot of the packed argument struct (a device address).
ENTRY_ARG_CTYPE = ctypes.c_uint64

#: torch dtype -> PPL scalar type name usable in ``T *ptr`` parameters and tensors.
PPL_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
}


#: Scalar parameter dtype (TIR name) -> (C type in the kernel signature, its ctypes type, torch dtype).
SCALAR_TYPES: dict[str, tuple[str, type, torch.dtype]] = {
    "float32": ("float", ctypes.c_float, torch.float32),
    "int32": ("int", ctypes.c_int32, torch.int32),
}


def entry_name(func_name: str) -> str:
    """Name of the ``__KERNEL__`` function generated for TileLang function ``func_name``.

    >>> entry_name("add")
    'add_kernel'
    >>> entry_name("add_kernel")
    'add_kernel'
    """
    if not func_name:
        raise ValueError("kernel function name must not be empty")
    return func_name if func_name.endswith(_KERNEL_SUFFIX) else func_name + _KERNEL_SUFFIX


def launch_symbol(func_name: str) -> str:
    """Symbol the runtime launches: ppl-compile's packed-argument wrapper of the kernel."""
    return entry_name(func_name) + _ENTRY_SUFFIX


def ppl_dtype(dtype: torch.dtype) -> str:
    """PPL type name for ``dtype``; raises ``TypeError`` naming the supported ones."""
    try:
        return PPL_DTYPES[dtype]
    except KeyError:
        valid = ", ".join(str(d).removeprefix("torch.") for d in PPL_DTYPES)
        raise TypeError(f"dtype {dtype} has no PPL equivalent on the tpu target; supported: {valid}") from None


class AbiError(ValueError):
    """A kernel whose parameters cannot be bound to the ABI (a scalar of a type the
    ABI has no slot for, or a device parameter that is no declared parameter)."""

    def __init__(self, message: str, param: str) -> None:
        self.param = param
        super().__init__(message)


@dataclass(frozen=True)
class PointerSlot:
    """One ``T *ptr_<slot>`` parameter of the entry: the ``slot``-th declared tensor."""

    slot: int
    buffer: Any  #: the declared tensor's TIR Buffer
    used: bool  #: whether the device function uses it (its data variable is a device parameter)

    @property
    def name(self) -> str:
        return f"ptr_{self.slot}"


@dataclass(frozen=True)
class ScalarSlot:
    """One by-value ``float``/``int`` parameter ``arg_<slot>`` of the entry: the ``slot``-th declared parameter."""

    slot: int
    var: Any  #: the device function's TIR Var of the scalar (or the host's, if the body never reads it)
    ctype: str  #: C type in the kernel signature

    @property
    def name(self) -> str:
        return f"arg_{self.slot}"


@dataclass(frozen=True)
class ShapeSlot:
    """One by-value ``int`` parameter of the entry: a symbolic dimension, after the declared parameters."""

    slot: int
    var: Any  #: the device function's TIR Var of the dimension (or the host's, if the body never reads it)

    @property
    def symbol(self) -> str:
        return str(self.var.name)


def shape_symbols(shapes: Sequence[Sequence[Any]]) -> list[str]:
    """Names of the symbolic dimensions in ``shapes`` (the declared parameters' shapes, in
    declared order; a symbolic dim is a ``str`` or a TIR ``Var``, a static one an ``int``
    or ``IntImm``): each distinct name once, in order of first appearance.  This order is
    the order of the entry's :class:`ShapeSlot` parameters, for the codegen and the runtime.

    >>> shape_symbols([("M", 256), (256,), ("M", "N")])
    ['M', 'N']
    """
    names: list[str] = []
    for shape in shapes:
        for dim in shape:
            name = _symbol_name(dim)
            if name is not None and name not in names:
                names.append(name)
    return names


def _symbol_name(dim: Any) -> str | None:
    """The variable name of a symbolic dim (``str`` or TIR ``Var``); ``None`` for a static one."""
    if isinstance(dim, str):
        return dim
    if isinstance(dim, int) or hasattr(dim, "value"):  # a Python int or a TIR IntImm
        return None
    name = getattr(dim, "name", None)
    return None if name is None else str(name)


def bind_pointers(
    declared: Sequence[Any], device_params: Sequence[Any], shape_vars: Sequence[Any] = ()
) -> list[PointerSlot | ScalarSlot | ShapeSlot]:
    """The entry's parameters: one per declared parameter, in declared order, then one
    per symbolic dimension (``shape_vars``, in :func:`shape_symbols` order).

    ``declared`` are the user's parameters (TIR ``Buffer`` for a tensor, ``Var`` for
    a scalar); ``device_params`` the device function's parameters, each of which
    must be the data variable of a declared buffer, a declared scalar or a shape
    variable (compared by identity).  Raises :class:`AbiError` for a scalar of a type
    without a C slot (``SCALAR_TYPES``), a shape variable that is not ``int32``, or an
    unbound device parameter.
    """
    slots: list[PointerSlot | ScalarSlot | ShapeSlot] = []
    bound: list[Any] = []
    for slot, param in enumerate(declared):
        data = getattr(param, "data", None)
        if data is None:
            dtype = str(param.dtype)
            if dtype not in SCALAR_TYPES:
                raise AbiError(
                    f"scalar kernel parameter {param.name} has type {dtype}; scalar parameters may be "
                    f"{', '.join('T.' + t for t in SCALAR_TYPES)}",
                    str(param.name),
                )
            bound.append(param)
            slots.append(ScalarSlot(slot, param, SCALAR_TYPES[dtype][0]))
            continue
        used = any(data.same_as(p) for p in device_params)
        if used:
            bound.append(data)
        slots.append(PointerSlot(slot, param, used))
    for index, var in enumerate(shape_vars):
        if str(var.dtype) != SHAPE_DTYPE:
            raise AbiError(f"symbolic dimension {var.name} has type {var.dtype}; symbolic dimensions must be {SHAPE_DTYPE}", str(var.name))
        bound.append(var)
        slots.append(ShapeSlot(len(declared) + index, var))
    for p in device_params:
        if not any(p.same_as(b) for b in bound):
            raise AbiError(f"device parameter {p.name} is not the data of any declared tensor parameter", str(p.name))
    return slots


def slot_ctypes(params: Sequence[tuple[torch.dtype, bool]]) -> list[type]:
    """ctypes type of each entry argument: ``(dtype, is_scalar)`` per declared parameter."""
    by_torch = {torch_dtype: ct for _c, ct, torch_dtype in SCALAR_TYPES.values()}
    out: list[type] = []
    for dtype, scalar in params:
        if not scalar:
            out.append(ENTRY_ARG_CTYPE)
        elif dtype in by_torch:
            out.append(by_torch[dtype])
        else:
            raise TypeError(f"scalar kernel parameter of dtype {dtype} has no tpu ABI slot; use float32 or int32")
    return out


def entry_arguments(values: Sequence[int | float], types: Sequence[type]) -> ctypes.Structure:
    """The packed-argument struct of the entry: ``values[i]`` (a device address or a
    scalar) stored as ``types[i]``, with C's natural alignment like ppl-compile's struct."""
    if len(values) != len(types):
        raise ValueError(f"{len(values)} argument values for {len(types)} entry slots")
    fields = [(f"a{i}", t) for i, t in enumerate(types)] or [("a0", ENTRY_ARG_CTYPE)]
    struct = type("EntryArguments", (ctypes.Structure,), {"_fields_": fields})
    arguments: ctypes.Structure = struct(*values)
    return arguments
