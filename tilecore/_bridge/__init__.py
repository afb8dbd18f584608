"""The tilelang bridge: the ONLY part of tilecore that touches tilelang internals.

One module per concept, driven by the declarative table
:data:`~tilecore._bridge.seams.SEAMS` (owner, attribute, wrapper, why):

=====================  ==============================================================
``seams``              the table: every tilelang name tilecore patches, registers, reads
``gate``               supported version and every seam checked before anything changes
``patches``            :func:`install` applies the table, :func:`uninstall` reverts it
``tvm_targets``        declared targets <-> TVM targets (normalizer, detector)
``backend_module``     ``BackendModule("tilecore")``: lowering/codegen through hooks
``jit_kernel``         the JITKernel seams: adapter creation after a compile and from the cache
``adapter``            the adapter of a backend-owned kernel (``on_fault`` injected)
``convert``            tilelang params/sources -> tilecore values
``kernel_cache``       disk-cache layout of backend-owned kernels; eviction of a faulted one
``cache_key``          backend identity in the cache key
``cache_tiers``        further cache tiers (:func:`add_tier`); activation adds the remote one
``profiler``           tilelang's Profiler routed to the backend (supply, timing)
``call_forms``         ``@tilelang.jit`` over ``@T.prim_func`` and ``kernel[grid]``
``tuner``              ``AutoTuner.run`` offered to tune runners (:func:`add_tune_runner`): an executor
``reuse``              tilelang pieces backends reuse (public as :mod:`tilecore.upstream`)
=====================  ==============================================================

Every wrapper falls through to the original for kernels whose target no
tilecore backend owns.  Importing this package imports neither tilelang nor torch.
"""

from __future__ import annotations

from tilecore._bridge.cache_tiers import add_tier
from tilecore._bridge.gate import BridgeError, check_loading_backend, problems, retired_seams
from tilecore._bridge.kernel_cache import local_cache_dir
from tilecore._bridge.patches import install, installed, uninstall
from tilecore._bridge.tuner import add_runner as add_tune_runner
from tilecore._bridge.tuner import remove_runner as remove_tune_runner
from tilecore._bridge.tvm_targets import resolve_tvm, tvm_config

__all__ = [
    "BridgeError",
    "add_tier",
    "add_tune_runner",
    "check_loading_backend",
    "install",
    "installed",
    "local_cache_dir",
    "problems",
    "remove_tune_runner",
    "resolve_tvm",
    "retired_seams",
    "tvm_config",
    "uninstall",
]
