"""Versions: the tilecore distribution, the plugin API it implements, the tilelang it supports."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

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

#: The one supported tilelang range.  Every pyproject that names tilelang uses
#: exactly this string (tests/test_versions.py checks them), and the bridge's
#: gate refuses any other version.  Exactly the 0.1.15 series: the bridge wraps
#: private tilelang methods, and 0.1.15 is the only release CI installs and tests
#: (0.1.14 has the same seams but no CI job, so it is not claimed).
TILELANG_REQUIREMENT = ">=0.1.15,<0.1.16"


def supported_tilelang() -> SpecifierSet:
    """:data:`TILELANG_REQUIREMENT` as a ``packaging`` specifier set."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(TILELANG_REQUIREMENT)


_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
_PLAIN_RELEASE = re.compile(rf"^{_RELEASE}$")
_HALF_OPEN_RANGE = re.compile(rf"^>=({_RELEASE}),<({_RELEASE})$")


def _release_tuple(version: str, length: int) -> tuple[int, ...]:
    parts = [int(part) for part in version.split(".")]
    return tuple(parts + [0] * (length - len(parts)))


def tilelang_version_supported(version: str) -> bool:
    """Whether tilelang ``version`` (its local ``+...`` part ignored) is in :data:`TILELANG_REQUIREMENT`,
    exactly as ``supported_tilelang().contains(version, prereleases=True)`` answers.

    Activation checks the installed tilelang, and importing ``packaging.specifiers`` (which pulls in
    ``packaging.tags`` and an ELF reader) was the largest part of its cost.  A plain release
    (``0.1.15``) against a ``>=A,<B`` range is therefore compared as zero-padded integer tuples,
    which is PEP 440's order for plain releases; every other form (pre-, post-, dev-releases, or a
    differently written range) is left to ``packaging``.  tests/test_versions.py checks both paths agree.
    """
    public = version.split("+")[0]
    bounds = _HALF_OPEN_RANGE.match(TILELANG_REQUIREMENT)
    if bounds is None or _PLAIN_RELEASE.match(public) is None:
        return bool(supported_tilelang().contains(public, prereleases=True))
    lower, upper = bounds.groups()
    length = max(len(v.split(".")) for v in (public, lower, upper))
    release = _release_tuple(public, length)
    return _release_tuple(lower, length) <= release < _release_tuple(upper, length)
