"""The registry machinery: discovery, loading, resolution, hook dispatch and their messages.

A backend author never reads this package; :class:`~tilecore._registry.registry.Registry`
is its face and the only module that composes the others.
"""

from tilecore._registry.discovery import IN_PROCESS, Backend, State
from tilecore._registry.registry import Registry
from tilecore._registry.resolution import probe

__all__ = ["IN_PROCESS", "Backend", "Registry", "State", "probe"]
