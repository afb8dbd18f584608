"""The call path of kernels compiled for backend-owned targets.

:class:`Launcher` sits between the user's call and the backend's
:class:`~tilecore.kernel.KernelAdapter`: it checks every argument against the
kernel signature (count, tensor-ness, dtype, shape, device), allocates the
``out_idx`` outputs, calls the adapter with one tensor per parameter, and
returns the outputs the way tilelang does (one tensor, a list, or ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tilecore.errors import KernelArgumentError
from tilecore.kernel import CompiledKernel, KernelAdapter, TensorParam


class Launcher:
    """Callable kernel for one compiled backend-owned kernel."""

    __slots__ = ("_device", "_inputs", "_where", "adapter", "kernel")

    def __init__(self, kernel: CompiledKernel, adapter: KernelAdapter) -> None:
        self.kernel = kernel
        self.adapter = adapter
        self._inputs = tuple(i for i in range(len(kernel.params)) if i not in kernel.out_idx)
        self._device = torch.device(kernel.target.device)
        self._where = kernel.error_owner

    def __call__(self, *args: Any) -> torch.Tensor | list[torch.Tensor] | None:
        params = self.kernel.params
        if len(args) == len(params):
            tensors = list(args)
            given: Sequence[int] = range(len(params))
        elif len(args) == len(self._inputs):
            tensors = [None] * len(params)
            for slot, value in zip(self._inputs, args, strict=True):
                tensors[slot] = value
            given = self._inputs
        else:
            raise KernelArgumentError(
                f"takes {len(self._inputs)} input tensors "
                f"({', '.join(params[i].describe() for i in self._inputs)})"
                + (f" or all {len(params)} parameters" if self.kernel.out_idx else "")
                + f", but was called with {len(args)}.",
                owner=self._where,
            )
        symbols: dict[str, int] = {}  # symbolic dimension -> its size in this call
        fixed_by: dict[str, tuple[int, int]] = {}  # symbolic dimension -> (argument, axis) that fixed it
        for slot in given:
            self._check(slot, tensors[slot], symbols, fixed_by)
        for slot in range(len(params)):
            if tensors[slot] is None:
                tensors[slot] = self._allocate(params[slot], symbols)
        self.adapter(*tensors)
        outputs = [tensors[i] for i in self.kernel.out_idx]
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _check(self, slot: int, value: Any, symbols: dict[str, int], fixed_by: dict[str, tuple[int, int]]) -> None:
        param = self.kernel.params[slot]

        def refused(problem: str) -> KernelArgumentError:
            return KernelArgumentError(f"argument {slot} ({param.describe()}) {problem}", owner=self._where)

        if not param.shape and isinstance(value, (int, float)) and not isinstance(value, bool):
            # A scalar parameter (a 0-d param) passed as a Python number, handed to the adapter as is.
            if not param.dtype.is_floating_point and not isinstance(value, int):
                raise refused(f"is an integer scalar, got {value!r}.")
            return
        if not isinstance(value, torch.Tensor):
            raise refused(f"must be a torch.Tensor, got {type(value).__name__}.")
        if value.dtype != param.dtype:
            raise refused(f"has dtype {value.dtype}; expected {param.dtype}. Convert it with .to({param.dtype}).")
        if value.device != self._device and not (value.device.type == self._device.type and self._device.index is None):
            raise refused(
                f"is on device {value.device}; this target takes tensors on {self._device}. Move it with .to({str(self._device)!r})."
            )
        if not value.is_contiguous():
            raise refused("must be contiguous; call .contiguous().")
        if value.dim() != len(param.shape):
            raise refused(f"has shape {tuple(value.shape)}; expected {len(param.shape)} dimensions.")
        for axis, (want, got) in enumerate(zip(param.shape, value.shape, strict=True)):
            if isinstance(want, str):
                bound = symbols.setdefault(want, int(got))
                first_slot, first_axis = fixed_by.setdefault(want, (slot, axis))
                if bound != got:
                    raise refused(
                        f"has {want}={got} on axis {axis}, but argument {first_slot} ({self.kernel.params[first_slot].describe()}) "
                        f"has {want}={bound} on axis {first_axis}; every tensor must give the dynamic dimension {want} the same size."
                    )
            elif want != got:
                raise refused(
                    f"has shape {tuple(value.shape)}; expected {_shape_text(param.shape)} (axis {axis} is {got}, expected {want})."
                )

    def _allocate(self, param: TensorParam, symbols: dict[str, int]) -> torch.Tensor:
        shape = []
        for dim in param.shape:
            if isinstance(dim, str):
                if dim not in symbols:
                    raise KernelArgumentError(f"cannot allocate output {param.describe()}: no input fixes {dim}.", owner=self._where)
                shape.append(symbols[dim])
            else:
                shape.append(dim)
        return torch.empty(shape, dtype=param.dtype, device=self._device)


def _shape_text(shape: Sequence[int | str]) -> str:
    """``shape`` written like a tuple, dynamic dimensions by their bare names: ``(M, 256)``."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def as_list(outputs: torch.Tensor | Sequence[torch.Tensor] | None) -> list[torch.Tensor]:
    if outputs is None:
        return []
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return list(outputs)


def output_indices(out_idx: int | Sequence[int] | None, n_params: int) -> tuple[int, ...]:
    """Normalise tilelang's ``out_idx`` (int, list, negatives) into sorted positive indices."""
    if out_idx is None:
        return ()
    items = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    result = []
    for idx in items:
        if not -n_params <= idx < n_params:
            raise ValueError(f"out_idx {idx} is out of range for a kernel with {n_params} parameters")
        result.append(idx % n_params)
    return tuple(sorted(set(result)))
