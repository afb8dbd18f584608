"""The tilelang bridge: the ONLY part of tilecore that touches tilelang internals.

One module per concept, driven by the declarative table
:data:`~tilecore._bridge.seams.SEAMS` (owner, attribute, wrapper, why):

=====================  ==============================================================
``seams``              the table: every tilelang name tilecore patches, registers, reads
``gate``               supported version and every seam checked before anything changes
``patches``            :func:`install` applies the table, :func:`uninstall` reverts it
``targets``            declared targets <-> TVM targets (normalizer, detector)
``backend_module``     ``BackendModule("tilecore")``: lowering/codegen through hooks
``adapter``            adapters of backend-owned kernels; adapter creation and sources
``profiler``           tilelang's Profiler routed to the backend (supply, timing)
``cache``              disk-cache layout, key salt, further cache tiers
``stacked_jit``        ``@tilelang.jit`` over ``@T.prim_func`` and ``kernel[grid]``
``helpers``            tilelang pieces backends reuse (public as :mod:`tilecore.upstream`)
=====================  ==============================================================

Every wrapper falls through to the original for kernels whose target no
tilecore backend owns.  Importing this package imports neither tilelang nor torch.
"""

from __future__ import annotations

from tilecore._bridge.gate import BridgeError, check_loading_backend, check_version, problems, retired_seams
from tilecore._bridge.gate import check as check_tilelang
from tilecore._bridge.patches import install, installed, uninstall
from tilecore._bridge.seams import SEAMS, Seam
from tilecore._bridge.targets import TVM_KEY, builtin_kinds, resolve_tvm, tvm_config

__all__ = [
    "SEAMS",
    "TVM_KEY",
    "BridgeError",
    "Seam",
    "builtin_kinds",
    "check_loading_backend",
    "check_tilelang",
    "check_version",
    "install",
    "installed",
    "problems",
    "resolve_tvm",
    "retired_seams",
    "tvm_config",
    "uninstall",
]
