"""Errors raised by tilecore.

Every error a user can see names what failed, which backend distribution (and
version) is involved, why, and what to do about it.  They all derive from
:class:`TilecoreError` so callers can catch the family at once.
"""

from __future__ import annotations

from collections.abc import Iterable


class TilecoreError(RuntimeError):
    """Base class of every tilecore error."""


class PluginValidationError(TilecoreError):
    """A backend object does not satisfy the tilecore plugin contract."""


class IncompatibleBackendError(TilecoreError):
    """A backend was written for a tilecore plugin API major this core does not speak."""


class BackendLoadError(TilecoreError):
    """A backend failed to import, declare its targets or run one of its hooks.

    Raised only when the user names one of the backend's targets; at other times
    the error is recorded and shown by ``tilecore list``.
    """


class UnknownTargetError(TilecoreError, ValueError):
    """No installed backend declares the requested target."""


class AmbiguousTargetError(TilecoreError, ValueError):
    """Two backends claim the same target name or alias."""


class TargetOptionError(TilecoreError, ValueError):
    """A target option has a value the declaring backend does not accept."""


class KernelArgumentError(TilecoreError, TypeError):
    """A compiled kernel was called with arguments that do not match its signature."""


class ToolchainError(TilecoreError):
    """A backend's environment/toolchain setup could not find what it needs."""


def choices_text(choices: Iterable[str]) -> str:
    """Render a list of valid values for an error message."""
    items = sorted(set(choices))
    return ", ".join(items) if items else "<none>"
