"""Where the remote cache's signing key comes from.

Entries hold shared libraries that readers load into their process, so anyone who
can write to the store can run code on every reader.  A key shared by the fleet
(and not by the store) closes that hole: writers sign, readers refuse what is not
signed with it.  Sources, first match wins: the in-code setting
(``tilecore.remote.configure(key=...)``), ``TILECORE_REMOTE_CACHE_KEY`` (the key
itself), ``TILECORE_REMOTE_CACHE_KEY_FILE`` (a file holding it).
"""

from __future__ import annotations

import os
from pathlib import Path

from tilecore.errors import TilecoreError

KEY_ENV = "TILECORE_REMOTE_CACHE_KEY"
KEY_FILE_ENV = "TILECORE_REMOTE_CACHE_KEY_FILE"
MIN_KEY_BYTES = 16


class SigningKeyError(TilecoreError):
    """The configured signing key cannot be used."""


def load_key(explicit: str | bytes | None = None) -> tuple[bytes | None, str]:
    """The signing key and where it came from (``"none"`` when no key is configured)."""
    if explicit is not None:
        return _checked(explicit.encode() if isinstance(explicit, str) else explicit, "configure(key=...)"), "configure(key=...)"
    value = os.environ.get(KEY_ENV)
    if value:
        return _checked(value.encode(), KEY_ENV), KEY_ENV
    path = os.environ.get(KEY_FILE_ENV)
    if path:
        file = Path(path).expanduser()
        try:
            data = file.read_bytes().strip()
        except OSError as err:
            raise SigningKeyError(
                f"{KEY_FILE_ENV}={path}: cannot read the remote cache signing key ({err.strerror}). "
                f"Fix the path or its permissions, or unset {KEY_FILE_ENV}."
            ) from None
        return _checked(data, f"{KEY_FILE_ENV}={path}"), f"{KEY_FILE_ENV}={path}"
    return None, "none"


def _checked(key: bytes, source: str) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise SigningKeyError(
            f"remote cache signing key from {source} has {len(key)} bytes; use at least {MIN_KEY_BYTES} random bytes "
            f"(e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)."
        )
    return key
