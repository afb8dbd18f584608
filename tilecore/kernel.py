"""Value types that cross the hook boundary: parameters, compiled kernels, toolchains.

Backends see these tilecore types, never tilelang's internal classes, so a
tilelang upgrade that reshuffles its JIT internals changes one bridge module
and no backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from tilecore.errors import Owner
    from tilecore.targets import ResolvedTarget

#: Tensor supply kinds, the lower-cased names of tilelang's ``TensorSupplyType``.
SUPPLY_TYPES: tuple[str, ...] = ("integer", "uniform", "normal", "randn", "zero", "one", "auto")


@dataclass(frozen=True, slots=True)
class TensorParam:
    """One kernel parameter: a tensor of ``dtype`` and ``shape``.

    A dynamic dimension is the name of its symbolic variable (a ``str``).
    """

    name: str
    dtype: torch.dtype
    shape: tuple[int | str, ...]

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def describe(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.name}: {str(self.dtype).removeprefix('torch.')}[{dims}]"


@dataclass(frozen=True, slots=True)
class CompiledKernel:
    """What ``tilecore_create_adapter`` receives.

    After a fresh compile ``device_mod`` is the lowered device IRModule and
    ``library_path`` is ``None``.  When the kernel comes from tilelang's disk
    cache, ``device_mod`` is ``None`` and ``library_path`` points at the file
    the adapter published through :attr:`KernelAdapter.library_path` last time
    (or is ``None`` if it published none).
    """

    name: str
    source: str
    params: tuple[TensorParam, ...]
    out_idx: tuple[int, ...]
    target: ResolvedTarget
    device_mod: Any = None
    library_path: str | None = None

    @property
    def error_owner(self) -> Owner:
        """The :class:`~tilecore.errors.Owner` of an error about this kernel."""
        return replace(self.target.error_owner, kernel=self.name)


@runtime_checkable
class KernelAdapter(Protocol):
    """The runtime object a backend returns from ``tilecore_create_adapter``.

    tilecore checks arguments against the kernel signature and allocates
    ``out_idx`` outputs before calling it, so ``__call__`` always receives one
    tensor per kernel parameter, in order, on the target's device.  It runs the
    kernel to completion (or enqueues it on the device's current stream) and
    writes the outputs in place.
    """

    library_path: str | None
    """A file tilecore persists in tilelang's disk cache (e.g. the built shared
    library), or ``None``."""

    def __call__(self, *tensors: torch.Tensor) -> None: ...


@dataclass(frozen=True, slots=True)
class Toolchain:
    """What a backend's setup hook found.

    ``fingerprint`` goes into every compile-cache key of the target, so a new
    compiler version never serves a stale binary; default it to the version.
    ``env`` lists environment variables the backend applies to the processes
    it starts (it never changes ``os.environ`` of the user's process).
    """

    name: str
    version: str
    location: str
    found_by: str
    env: Mapping[str, str] = field(default_factory=dict)
    fingerprint: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "notes", tuple(self.notes))
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", f"{self.name}=={self.version}")
