"""The kernel ABI shared by the PPL code generator and the runtime.

This module is the single place where the contract between generated PPL source
and the host launcher is written down:

* The generated PPL source defines exactly one kernel function::

      __KERNEL__ void <entry_name(name)>(T0 *ptr_0, T1 *ptr_1, ...)

  whose parameters are the TileLang kernel's tensor parameters in PrimFunc order.
  Each parameter is a pointer to global (device) memory whose element type is
  ``PPL_DTYPES[tensor.dtype]``. Static shapes are baked into the source; there are
  no scalar arguments.

* ``ppl-compile`` turns that function into device C with a packed-argument entry
  ``int <entry>_entry(const void *args)``; ``args`` points to a struct of N
  unsigned 64-bit device addresses, one per tensor parameter, in the same order
  (``ENTRY_ARG_CTYPE`` below). The runtime builds that struct and launches the
  ``<entry>_entry`` symbol (``launch_symbol``).

* The entry-name rule (``<name>_kernel`` unless the name already ends with
  ``_kernel``) is the one used by the SophGo TileLang fork; it lives only here.
"""

from __future__ import annotations

import ctypes

import torch

__all__ = [
    "ENTRY_ARG_CTYPE",
    "PPL_DTYPES",
    "entry_name",
    "launch_symbol",
    "ppl_dtype",
]

#: Suffix the fork appends to kernel function names.
_KERNEL_SUFFIX = "_kernel"

#: Suffix ppl-compile gives the packed-argument wrapper of a ``__KERNEL__`` function.
_ENTRY_SUFFIX = "_entry"

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
