"""Compiling and running the conformance kernels for one target.

Compiles are the slow part of the battery (about a second each on the host),
so :class:`KernelBuilder` compiles each named kernel once per session and
remembers a failure too: every case that needs a kernel that does not build
fails with the same compile error instead of compiling again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from tilecore.conformance.kernels import KERNELS, KernelCase, compare, make_inputs, style_for
from tilecore.targets import ResolvedTarget


class KernelBuilder:
    """``get(name)`` -> the kernel compiled with ``tilelang.compile(..., target=<as given>)``."""

    def __init__(self, target_text: str, target: ResolvedTarget, style: str | None = None) -> None:
        self.target_text = target_text
        self.target = target
        self.style = style or style_for(target)
        self.device = torch.device(target.device)
        self._done: dict[str, Any] = {}
        self._errors: dict[str, BaseException] = {}
        self._lock = threading.Lock()

    def case(self, name: str) -> KernelCase:
        return KERNELS[name]

    def get(self, name: str) -> Any:
        with self._lock:
            if name in self._errors:
                raise self._errors[name]
            if name not in self._done:
                import tilelang

                case = KERNELS[name]
                try:
                    self._done[name] = tilelang.compile(case.build(self.style), target=self.target_text, out_idx=case.out_idx)
                except Exception as err:
                    self._errors[name] = err
                    raise
            return self._done[name]

    def inputs(self, name: str, seed: int = 0) -> list[torch.Tensor]:
        return make_inputs(KERNELS[name], self.device, seed)

    def check(self, name: str, seed: int = 0) -> list[torch.Tensor]:
        """Compile ``name`` (a kernel with ``out_idx``), run it on seeded random inputs and
        compare with torch; returns the outputs."""
        kernel = self.get(name)
        inputs = self.inputs(name, seed)
        outputs = as_list(kernel(*inputs))
        check_device(outputs, self.device)
        compare(KERNELS[name], outputs, inputs)
        return outputs


def as_list(result: Any) -> list[torch.Tensor]:
    """A kernel's return value (one tensor, a list, or ``None``) as a list."""
    if result is None:
        return []
    if isinstance(result, torch.Tensor):
        return [result]
    return list(result)


def check_device(tensors: Sequence[torch.Tensor], device: torch.device) -> None:
    for index, tensor in enumerate(tensors):
        if tensor.device.type != device.type:
            raise AssertionError(f"output {index} is on {tensor.device}; the target's kernels take tensors on {device}")
