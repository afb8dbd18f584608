"""Tensors for the tpu target: host tensors on the emulator, ``tpu:0`` tensors on a card.

On a card, tensors live on ``tpu:0`` through SophGo's ``torch_tpu``.  PyPI's
``torch-tpu`` is a different project (Google's TorchTPU) with the same import
name, so the installed distribution is identified from its metadata *without
importing it*, and only SophGo's is ever used.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

import torch

from tilecore import TensorParam, ToolchainError
from tilecore.kit.supply import make_tensor
from tilelang_tpu.chips import error_owner

IMPORT_NAME = "torch_tpu"
_SOPHGO_MARKERS = ("sophgo", "sophon")
_GOOGLE_MARKERS = ("google", "torchtpu", "pytorch/xla", "torch_xla")
_FIELDS = ("Name", "Summary", "Author", "Author-email", "Maintainer", "Maintainer-email", "Home-page", "Project-URL", "Download-URL")


@dataclass(frozen=True)
class TorchTpu:
    """An installed distribution providing the ``torch_tpu`` module."""

    distribution: str
    version: str
    vendor: str  # "sophgo", "google" or "unknown"
    evidence: str


def _describe(dist: importlib.metadata.Distribution) -> TorchTpu:
    meta = dist.metadata
    values = [f"{field}: {value}" for field in _FIELDS for value in (meta.get_all(field) or [])]
    text = "\n".join(values).lower()
    vendor = "unknown"
    if any(marker in text for marker in _SOPHGO_MARKERS):
        vendor = "sophgo"
    elif any(marker in text for marker in _GOOGLE_MARKERS):
        vendor = "google"
    return TorchTpu(meta["Name"] or "?", dist.version, vendor, "; ".join(values) or "no metadata")


def installed_torch_tpu() -> list[TorchTpu]:
    """Distributions that install a top-level ``torch_tpu`` (metadata only; nothing is imported)."""
    names = importlib.metadata.packages_distributions().get(IMPORT_NAME, [])
    found = []
    for name in dict.fromkeys(names):
        try:
            found.append(_describe(importlib.metadata.distribution(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def require_sophgo_torch_tpu() -> TorchTpu:
    """SophGo's torch_tpu, or a clear error saying what is installed instead and what to do."""
    found = installed_torch_tpu()
    sophgo = [d for d in found if d.vendor == "sophgo"]
    if sophgo and len(found) == 1:
        return sophgo[0]
    where = error_owner("tpu:mode=pcie")
    if not found:
        raise ToolchainError(
            "keeps tensors on tpu:0 through SophGo's torch_tpu, which is not installed. Install the torch_tpu "
            "wheel from SophGo's SDK (not PyPI's torch-tpu, which is Google's TorchTPU), or run on the emulator with mode=cmodel.",
            owner=where,
        )
    listing = "; ".join(f"{d.distribution} {d.version} ({d.vendor}: {d.evidence})" for d in found)
    if sophgo:
        reason = f"several distributions install the module torch_tpu ({listing}); keep only SophGo's"
    elif any(d.vendor == "google" for d in found):
        reason = f"the installed torch_tpu is Google's TorchTPU, not SophGo's ({listing}); tilelang-tpu never uses it"
    else:
        reason = f"the installed torch_tpu is not identifiable as SophGo's ({listing})"
    raise ToolchainError(
        f"{reason}. Uninstall it (pip uninstall {found[0].distribution}) and install the torch_tpu wheel "
        "from SophGo's SDK, or run on the emulator with mode=cmodel.",
        owner=where,
    )


def supply(param: TensorParam, supply_kind: str, mode: str) -> torch.Tensor:
    """An input tensor for ``param``: on the host for the emulator, on ``tpu:0`` on a card."""
    if mode == "cmodel":
        return make_tensor(param, supply_kind, "cpu")
    require_sophgo_torch_tpu()
    import torch_tpu  # type: ignore[import-not-found]  # noqa: F401 - SophGo's: registers the "tpu" torch device

    return make_tensor(param, supply_kind, "tpu:0")
