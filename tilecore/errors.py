"""Errors raised by tilecore.

Every error a user can see names what failed, which backend distribution (and
version) is involved, why, and what to do about it.  They all derive from
:class:`TilecoreError` so callers can catch the family at once.

The fix is also kept apart from the message in :attr:`TilecoreError.fix`, so
``tilecore list``/``doctor`` can show it on its own line for every failed
backend (and ``--json`` can carry it as a field).  The backend an error
belongs to is a field too, :attr:`TilecoreError.owner`: the text is built from
it, and the registry gives an error raised in a hook without one its backend.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass(frozen=True, slots=True)
class Owner:
    """The backend an error belongs to: distribution, version, and the target (or backend) and kernel involved."""

    distribution: str
    version: str
    target: str = ""
    backend: str = ""
    kernel: str = ""

    def __str__(self) -> str:
        what = f"target {self.target}" if self.target else f"backend {self.backend!r}"
        return f"{f'kernel {self.kernel!r} for ' if self.kernel else ''}{what} ({self.distribution} {self.version})"


_E = TypeVar("_E", bound="TilecoreError")


class TilecoreError(RuntimeError):
    """Base class of every tilecore error.

    ``fix`` is what the user should do, in one sentence, or ``""`` when the
    message says it already (it is appended to the message when given).
    ``owner`` is the backend the error belongs to; the text starts with it.
    """

    def __init__(self, message: str = "", *, fix: str = "", owner: Owner | None = None) -> None:
        self.message, self.fix, self.owner = message, fix, owner
        super().__init__(self._text())

    @classmethod
    def about(cls: type[_E], who: Owner | str | None, message: str, **kwargs: Any) -> _E:
        """The error of ``who``: an :class:`Owner` is kept as the field, a plain name starts the text
        (``None``: the registry names the backend when the error leaves a hook)."""
        if who is None or isinstance(who, Owner):  # attribute(): a subclass's __init__ may not take owner=
            error = cls(message, **kwargs)
            return error if who is None else error.attribute(who)
        return cls(f"{who}: {message}", **kwargs)

    def _text(self) -> str:
        text = f"{self.owner}: {self.message}" if self.owner is not None else self.message
        return f"{text} Fix: {self.fix}" if self.fix and self.fix not in text else text

    def attribute(self: _E, owner: Owner) -> _E:
        """Give the error ``owner`` unless it has one (the registry does so for a hook's error); returns it."""
        if getattr(self, "owner", None) is None:  # getattr: a subclass may skip our __init__
            self.message, self.owner = getattr(self, "message", str(self)), owner
            self.fix = getattr(self, "fix", "")
            self.args = (self._text(),)
        return self


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
