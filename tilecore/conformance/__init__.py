"""The tilecore conformance suite: a pytest plugin any backend runs against its target.

Run it with either form::

    pytest --pyargs tilecore.conformance --tilecore-target=democpu
    pytest -p tilecore.conformance --tilecore-target=democpu

Options: ``--tilecore-json=PATH`` (results as JSON), ``--tilecore-cache-dir=DIR``
(default: a fresh private cache for the session).  The cases live in the
``cases_*.py`` files of this package; a backend lists constructs it does not
support in ``TargetSpec.unsupported`` (names in
:data:`tilecore.conformance.constructs.CONSTRUCTS`) and the cases needing them
are reported as ``unsupported``.  See docs/writing-a-backend.md.

This module is what ``-p tilecore.conformance`` registers: it carries the
light hooks of the top-level module ``_tilecore_conformance`` (the module the
``pytest11`` entry point of that name loads; its source is
``tilecore/conformance/_tilecore_conformance.py``, installed at the top level
of site-packages), which register :mod:`tilecore.conformance.plugin` once a
target is given.
"""

from _tilecore_conformance import (
    pytest_addoption,
    pytest_collect_file,
    pytest_configure,
    pytest_load_initial_conftests,
)

from tilecore.conformance.constructs import CONSTRUCTS

__all__ = [
    "CONSTRUCTS",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_load_initial_conftests",
]
