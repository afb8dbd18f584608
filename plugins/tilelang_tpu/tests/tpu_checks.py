"""Checks shared by the general ``T.Parallel`` tests (imported by name: conftest.py puts this
folder on ``sys.path``)."""

from typing import Any

import torch

#: TileLang float dtype -> torch dtype.
FLOATS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def run_checked(kernel: Any, *tensors: torch.Tensor, inputs: tuple[int, ...]) -> None:
    """Run ``kernel`` on ``tensors`` and check that those at positions ``inputs`` stay untouched."""
    before = {k: tensors[k].clone() for k in inputs}
    kernel(*tensors)
    for k, original in before.items():
        torch.testing.assert_close(tensors[k], original, rtol=0, atol=0, equal_nan=True, msg="the kernel wrote one of its inputs")
