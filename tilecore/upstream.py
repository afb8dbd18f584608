"""Pieces of upstream tilelang that backends reuse, behind tilecore's API.

Backends import tilelang internals only through this module: where tilelang
keeps them is the bridge's business (each name is a row of
:data:`tilecore._bridge.seams.SEAMS`, checked by the same gate as the patched
seams before first use), so a tilelang release that moves one changes the
bridge and no backend.

* :func:`lower_with_host_pipeline`: tilelang's portable CPU lowering (or the
  backend's own pass list) with the kernels marked as device functions of the
  backend's target;
* :func:`c_source`: C source of a device module lowered that way;
* :func:`template_include_dir`: tilelang's ``tl_templates`` headers;
* :func:`should_force_let_inline`: tilelang's ``LetInline`` policy, for a backend's own pass list;
* :func:`determine_target`: the TVM target ``tilelang.compile`` would use for a target;
* :func:`accepts`: whether a tilelang function takes a parameter -- the capability check a
  backend makes instead of comparing tilelang versions (``docs/tilelang-releases.md``);
* :func:`internal`: a tilelang name a backend needs that has no public home yet
  (``"tilelang.<module>:<attribute>"``, e.g. a constant of the device kind it delegates
  to); the backend names it, the gate checks the version first, a missing name is one
  ``BridgeError``.  ``tests/test_plugin_imports.py`` resolves every name the plugins
  pass here, so a tilelang release that moves one fails the tests, not a user's setup.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from tilecore._bridge import gate, reuse
from tilecore._version import TILELANG_REQUIREMENT

__all__ = [
    "TILELANG_REQUIREMENT",
    "accepts",
    "c_source",
    "determine_target",
    "internal",
    "lower_with_host_pipeline",
    "should_force_let_inline",
    "template_include_dir",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _gated(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func`` after the bridge's gate (supported tilelang, every seam present; checked once)."""

    @functools.wraps(func)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        gate.check()
        return func(*args, **kwargs)

    call.__module__ = __name__
    return call


lower_with_host_pipeline = _gated(reuse.lower_with_host_pipeline)
c_source = _gated(reuse.c_source)
template_include_dir = _gated(reuse.template_include_dir)
should_force_let_inline = _gated(reuse.should_force_let_inline)
determine_target = _gated(reuse.determine_target)
internal = _gated(reuse.internal)
accepts = _gated(gate.accepts)
