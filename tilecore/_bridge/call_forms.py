"""Two call forms tilecore adds to tilelang, for every target (tilelang's own and tilecore's).

* ``@tilelang.jit(...)`` stacked directly on a ``@T.prim_func`` (tilelang 0.1.15
  raises ``TypeError`` at decoration time): the ``tilelang.jit`` attribute is
  replaced by :func:`wrap_jit`'s shim, which turns a ``PrimFunc`` into a
  :class:`PrimFuncKernel` compiled on first use and passes everything else to
  the original decorator unchanged.
* ``kernel[grid](*args)``, the Triton-style launch form: ``JITKernel.__getitem__``
  (:func:`grid_getitem`) validates the grid and returns the kernel; the launch
  grid itself is fixed by ``T.Kernel`` inside the program.

Neither depends on a backend; they apply to kernels of every target as soon as
tilecore is active.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tilecore._bridge.convert import kernel_name


class PrimFuncKernel:
    """``@tilelang.jit(...)`` applied directly to a ``@T.prim_func``: compiles on first use."""

    def __init__(self, prim_func: Any, compile_args: Mapping[str, Any]) -> None:
        self.prim_func = prim_func
        self._compile_args = {k: v for k, v in compile_args.items() if k != "debug_root_path" and v is not None}
        self._kernel: Any = None
        self._lock = threading.Lock()
        functools.update_wrapper(self, prim_func, assigned=("__doc__",), updated=())

    def compile(self) -> Any:
        if self._kernel is None:
            with self._lock:
                if self._kernel is None:
                    import tilelang

                    self._kernel = tilelang.compile(self.prim_func, **self._compile_args)
        return self._kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.compile()(*args, **kwargs)

    def __getitem__(self, grid: Any) -> Any:
        return self.compile()[grid]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("prim_func",):
            raise AttributeError(name)
        return getattr(self.compile(), name)

    def __repr__(self) -> str:
        return f"<tilecore PrimFuncKernel {kernel_name(self.prim_func)} {self._compile_args}>"


def grid_getitem(self: Any, grid: Any) -> Any:
    """``kernel[grid](*args)``: the launch grid is fixed by ``T.Kernel``; the subscript
    is accepted for the Triton-style call form and validated, then ignored."""
    dims = grid if isinstance(grid, tuple) else (grid,)
    if not dims or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise TypeError(f"kernel[grid]: grid must be a positive int or a tuple of positive ints, got {grid!r}")
    return self


def add_grid_getitem(registry: object, original: object) -> Callable[[Any, Any], Any]:
    """The ``JITKernel.__getitem__`` seam (tilelang defines none)."""
    return grid_getitem


def wrap_jit(registry: object, original: Callable[..., Any]) -> Callable[..., Any]:
    """The ``tilelang.jit`` seam: the original decorator, also accepting a ``PrimFunc``."""
    from tvm.tirx import PrimFunc

    @functools.wraps(original)
    def jit(func: Any = None, **compile_args: Any) -> Any:
        if isinstance(func, PrimFunc):
            return PrimFuncKernel(func, compile_args)
        if func is not None:
            return original(func, **compile_args)
        decorate = original(**compile_args)

        def decorator(inner: Any) -> Any:
            if isinstance(inner, PrimFunc):
                return PrimFuncKernel(inner, compile_args)
            return decorate(inner)

        return decorator

    return jit
