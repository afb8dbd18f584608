"""Device-generic tensor supply for backends: every supply kind for any torch device.

``make_tensor`` has the same value distributions as tilelang's own supply, so a
backend's ``tilecore_supply_tensor`` is usually one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilecore.kernel import SUPPLY_TYPES, TensorParam

if TYPE_CHECKING:
    import torch


def make_tensor(param: TensorParam, supply: str, device: str | torch.device) -> torch.Tensor:
    """A tensor for ``param`` on ``device`` filled according to ``supply``."""
    import torch  # here, not at module level: importing this module must not import torch

    if supply not in SUPPLY_TYPES:
        raise ValueError(f"unknown tensor supply {supply!r}; valid: {', '.join(SUPPLY_TYPES)}")
    if not param.is_static:
        raise ValueError(
            f"cannot supply a tensor for {param.describe()}: its shape is dynamic. "
            "Pass input tensors explicitly (profiler.do_bench(input_tensors=...))."
        )
    shape = tuple(int(d) for d in param.shape)
    dtype = param.dtype
    if supply == "zero":
        return torch.zeros(shape, dtype=dtype, device=device)
    if supply == "one":
        return torch.ones(shape, dtype=dtype, device=device)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).to(dtype)
    is_float = dtype.is_floating_point
    if supply == "integer" or (supply == "auto" and not is_float):
        low, high = (0, 3) if not dtype.is_signed and not is_float else (-2, 3)
        return torch.randint(low, high, shape, device=device).to(dtype)
    if not is_float and supply in ("uniform", "normal"):
        return torch.ones(shape, dtype=dtype, device=device)
    if supply in ("uniform", "auto"):
        return torch.empty(shape, dtype=torch.float32, device=device).uniform_(-1.0, 1.0).to(dtype)
    if supply == "normal":
        return torch.empty(shape, dtype=torch.float32, device=device).normal_(-1.0, 1.0).to(dtype)
    return torch.randn(shape, device=device).to(dtype)  # "randn"
