"""Versions: the tilecore distribution, the plugin API it implements, the tilelang it supports."""

from __future__ import annotations

import re

__version__ = "0.2.0"

#: The public repository (also each pyproject's Project-URLs; tests/test_release_metadata.py).
PROJECT_URL = "https://github.com/tilecore-dev/tilecore"


def docs_url(page: str) -> str:
    """The documentation page ``page`` (``"user-guide.md#json-output"``) of this release, at its tag:
    a wheel ships no docs/ folder, and a tagged URL stays valid and matches the installed version."""
    return f"{PROJECT_URL}/blob/v{__version__}/docs/{page}"


#: (major, minor) of the plugin API.  A backend declares the version it was
#: written for as ``tilecore_api_version = "1.0"``; a different major is refused.
#: 1.1 added the optional hook ``tilecore_doctor_target`` and ``tilecore_role``.
API_VERSION: tuple[int, int] = (1, 1)

#: The tilelang window the core (its bridge) is tested with: CI runs the conformance suite and
#: the backends' suites against each release in it (docs/tilelang-releases.md).  Every pyproject
#: that names tilelang uses exactly this string (tests/test_versions.py checks them).  A backend
#: declares its own tested range the same way, as its distribution's requirement on tilelang;
#: TILECORE_TILELANG_CHECK=seams accepts a newer, untested tilelang (tilecore._registry.compat).
TILELANG_REQUIREMENT = ">=0.1.14,<0.1.16"


_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
_PLAIN_RELEASE = re.compile(rf"^{_RELEASE}$")
_HALF_OPEN_RANGE = re.compile(rf"^>=({_RELEASE}),<({_RELEASE})$")


def _release_tuple(version: str, length: int) -> tuple[int, ...]:
    parts = [int(part) for part in version.split(".")]
    return tuple(parts + [0] * (length - len(parts)))


def version_in_range(version: str, requirement: str) -> bool:
    """Whether ``version`` (its local ``+...`` part ignored) is in ``requirement``, exactly as
    ``SpecifierSet(requirement).contains(version, prereleases=True)`` answers.

    Activation checks the installed tilelang, and importing ``packaging.specifiers`` (which pulls in
    ``packaging.tags`` and an ELF reader) was the largest part of its cost.  A plain release
    (``0.1.15``) against a ``>=A,<B`` range is therefore compared as zero-padded integer tuples,
    which is PEP 440's order for plain releases; every other form (pre-, post-, dev-releases, or a
    differently written range) is left to ``packaging``.  tests/test_versions.py checks both paths agree.
    """
    public = version.split("+")[0]
    bounds = _HALF_OPEN_RANGE.match(requirement.replace(" ", ""))
    if bounds is None or _PLAIN_RELEASE.match(public) is None:
        from packaging.specifiers import SpecifierSet

        return bool(SpecifierSet(requirement).contains(public, prereleases=True))
    lower, upper = bounds.groups()
    length = max(len(v.split(".")) for v in (public, lower, upper))
    release = _release_tuple(public, length)
    return _release_tuple(lower, length) <= release < _release_tuple(upper, length)
