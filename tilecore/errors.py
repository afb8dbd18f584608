"""Errors raised by tilecore.

Every error a user can see names what failed, which backend distribution (and
version) is involved, why, and what to do about it.  They all derive from
:class:`TilecoreError` so callers can catch the family at once.

The fix is also kept apart from the message in :attr:`TilecoreError.fix`, so
``tilecore list``/``doctor`` can show it on its own line for every failed
backend (and ``--json`` can carry it as a field).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TilecoreError(RuntimeError):
    """Base class of every tilecore error.

    ``fix`` is what the user should do, in one sentence, or ``""`` when the
    message says it already (it is appended to the message when given).
    """

    def __init__(self, message: str = "", *, fix: str = "") -> None:
        self.fix = fix
        text = f"{message} Fix: {fix}" if fix and fix not in message else message
        super().__init__(text)


class PluginValidationError(TilecoreError):
    """A backend object does not satisfy the tilecore plugin contract."""


class IncompatibleBackendError(TilecoreError):
    """A backend was written for a tilecore plugin API major this core does not speak."""


class BackendLoadError(TilecoreError):
    """A backend failed to import, declare its targets or run one of its hooks, or was not
    loaded because ``TILECORE_PLUGINS`` / ``TILECORE_DISABLE_PLUGIN_AUTOLOAD`` blocks it.

    Raised only when the user names one of the backend's targets; at other times
    the error is recorded and shown by ``tilecore list``.
    """


class HookReturnError(PluginValidationError):
    """A backend's hook returned a value of the wrong type (names distribution, version, hook and type)."""


class UnknownTargetError(TilecoreError, ValueError):
    """No installed backend declares the requested target."""


class AmbiguousTargetError(TilecoreError, ValueError):
    """Two backends claim the same target name or alias."""


class TargetOptionError(TilecoreError, ValueError):
    """A target option has a value the declaring backend does not accept."""


class MalformedTargetError(TargetOptionError):
    """A target string or dict is not well formed (bad key types, repeated options, non-ASCII text)."""


class KernelArgumentError(TilecoreError, TypeError):
    """A compiled kernel was called with arguments that do not match its signature."""


class ToolchainError(TilecoreError):
    """A backend's environment/toolchain setup could not find what it needs."""


def choices_text(choices: Iterable[object]) -> str:
    """Render a list of valid values for an error message (any value type; never raises)."""
    items = sorted({str(c) if isinstance(c, str) else repr(c) for c in choices})
    return ", ".join(items) if items else "<none>"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" Did you mean 'x'?"`` for the closest of ``choices`` (difflib), or ``""``."""
    close = difflib.get_close_matches(word, sorted(set(choices)), n=3, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


class KernelFaultError(TilecoreError):
    """A kernel faulted while running (the device or emulator reported an error).

    Backends raise it (naming the target and the kernel) when their runtime
    reports a fault, after :meth:`ArtifactStore.discard`-ing the kernel's build
    products; tilecore then removes the kernel from tilelang's caches, so a
    kernel that faulted is never served from a cache.
    """
