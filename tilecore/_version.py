"""Versions: the tilecore distribution, the plugin API it implements, the tilelang it supports."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

__version__ = "0.1.0"

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
