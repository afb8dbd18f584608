"""What tilecore records about targets it does not load: ``known_targets.json``.

The host compiler's own target kinds (for the supported tilelang, so the answer is the
same before and after ``import tilelang``) and which distribution provides a well-known
target name (the "pip install ..." hint of the unknown-target message).
"""

from __future__ import annotations

import functools
import json
import sys
from importlib import resources
from typing import Any


@functools.lru_cache(maxsize=1)
def _known_targets() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("tilecore").joinpath("known_targets.json").read_text())
    return data


def known_distributions() -> dict[str, str]:
    return dict(_known_targets()["distributions"])


def loaded_host_kinds() -> tuple[str, ...]:
    """The host compiler's own target kinds: the live list once its target registry is imported
    (never imported here), else the list recorded for the supported tilelang in known_targets.json,
    so the answer is the same before and after ``import tilelang``."""
    module = sys.modules.get("tvm.target")
    target_cls = getattr(module, "Target", None) if module is not None else None
    if target_cls is None:
        return tuple(_known_targets()["host_kinds"])
    return tuple(target_cls.list_kinds())
