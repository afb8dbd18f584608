"""Finding installed backends without importing them.

Backends are entry points in the group ``tilecore.backends``; the entry
point's name is the backend name.  Listing reads distribution metadata only;
importing a backend is the registry's job and happens on first use.

Environment (read once per activation):

``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1``
    Load no entry points, except backends named positively in
    ``TILECORE_PLUGINS`` (as ``PYTEST_PLUGINS`` does for pytest).
``TILECORE_PLUGINS="acme,no:other"``
    Comma-separated backend names.  ``no:NAME`` blocks a backend.  Plain names
    form an allow-list: when any is given, only those backends load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

ENTRY_POINT_GROUP = "tilecore.backends"
_TRUTHY = {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True)
class PluginPolicy:
    """Which entry points may load, from the environment."""

    autoload: bool
    allowed: frozenset[str]
    blocked: frozenset[str]

    @classmethod
    def from_env(cls, environ: os._Environ[str] | dict[str, str] | None = None) -> PluginPolicy:
        environ = os.environ if environ is None else environ
        autoload = environ.get("TILECORE_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in _TRUTHY
        allowed: set[str] = set()
        blocked: set[str] = set()
        for item in environ.get("TILECORE_PLUGINS", "").split(","):
            item = item.strip()
            if not item:
                continue
            if item.startswith("no:"):
                blocked.add(item[3:].strip())
            else:
                allowed.add(item)
        return cls(autoload=autoload, allowed=frozenset(allowed), blocked=frozenset(blocked))

    def decide(self, name: str) -> str | None:
        """``None`` if ``name`` may load, else the reason it may not."""
        if name in self.blocked:
            return f"blocked by TILECORE_PLUGINS=no:{name}"
        if self.allowed:
            if name in self.allowed:
                return None
            return f"not in the TILECORE_PLUGINS allow-list ({', '.join(sorted(self.allowed))})"
        if not self.autoload:
            return f"autoload disabled by TILECORE_DISABLE_PLUGIN_AUTOLOAD (name it in TILECORE_PLUGINS={name} to load it)"
        return None


@dataclass(frozen=True, slots=True)
class DiscoveredBackend:
    """An installed backend as its metadata describes it (nothing imported)."""

    name: str
    value: str
    distribution: str
    version: str
    entry_point: EntryPoint


def discover() -> list[DiscoveredBackend]:
    """All entry points of the group, sorted by name then value for a deterministic load order.

    Duplicates of one (name, value) pair, e.g. the same distribution visible
    twice through a ``lib64 -> lib`` symlink, are collapsed.
    """
    found: dict[tuple[str, str], DiscoveredBackend] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        dist_name = dist.metadata["Name"] if dist is not None else "<unknown distribution>"
        dist_version = dist.version if dist is not None else "?"
        found.setdefault((ep.name, ep.value), DiscoveredBackend(ep.name, ep.value, dist_name, dist_version, ep))
    return [found[key] for key in sorted(found)]
