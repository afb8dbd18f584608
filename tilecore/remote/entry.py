"""One remote cache entry = one blob: a signed manifest and the entry's files.

Layout (format 1)::

    b"TCRC" | u8 format | u8 flags | u32 manifest length (big endian)
    | manifest (UTF-8 JSON) | payload (the files, concatenated in manifest order)
    | HMAC-SHA256 over everything before it (32 bytes, only when flag SIGNED is set)

The manifest records the format, the cache key, the producing versions (tilelang,
tilecore, backend) and, per file, its name, size and SHA-256.  :func:`decode`
accepts a blob only if every one of those checks out; anything else raises
:class:`EntryRejected` with the reason, and the caller recompiles.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass

MAGIC = b"TCRC"
FORMAT = 1
FLAG_SIGNED = 0x01
_HEADER = struct.Struct(">4sBBI")
_MAC_SIZE = hashlib.sha256().digest_size
#: File names an entry may carry: plain names in one directory, nothing hidden, no separators.
#: Always used with ``fullmatch`` (``$`` alone would accept a trailing newline: ``"lib.so\n"``).
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class EntryRejected(Exception):
    """A blob that must not be installed; ``reason`` is one of ``format``, ``signature``,
    ``key``, ``version``, ``hash``, ``size``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    key: str
    versions: dict[str, str]
    files: dict[str, bytes]

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())


def encode(key: str, versions: Mapping[str, str], files: Mapping[str, bytes], secret: bytes | None) -> bytes:
    """The blob for ``files`` (name -> content), signed with ``secret`` when one is given."""
    for name in files:
        if not _FILE_NAME.fullmatch(name):
            raise ValueError(f"remote cache entries hold plain file names only, not {name!r}")
    names = sorted(files)
    manifest = {
        "format": FORMAT,
        "key": key,
        "created": int(time.time()),
        "versions": dict(sorted(versions.items())),
        "files": [{"name": n, "size": len(files[n]), "sha256": hashlib.sha256(files[n]).hexdigest()} for n in names],
    }
    head = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    flags = FLAG_SIGNED if secret else 0
    body = _HEADER.pack(MAGIC, FORMAT, flags, len(head)) + head + b"".join(files[n] for n in names)
    return body + hmac.new(secret, body, hashlib.sha256).digest() if secret else body


def decode(blob: bytes, key: str, versions: Mapping[str, str], secret: bytes | None) -> Entry:
    """Verify ``blob`` and return its entry, or raise :class:`EntryRejected`.

    With a ``secret`` the blob must be signed with it; without one, a signature cannot be
    checked and only the content hashes protect the entry (see docs/remote-cache.md).
    Every value of ``versions`` must equal the producer's value of the same name.
    """
    if len(blob) < _HEADER.size:
        raise EntryRejected("format", f"{len(blob)} bytes is shorter than the header")
    magic, fmt, flags, head_len = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise EntryRejected("format", "not a tilecore cache entry (bad magic)")
    if fmt != FORMAT:
        raise EntryRejected("version", f"entry format {fmt}, this tilecore reads format {FORMAT}")
    signed = bool(flags & FLAG_SIGNED)
    body = blob
    if signed:
        if len(blob) < _HEADER.size + _MAC_SIZE:
            raise EntryRejected("format", "signed entry shorter than its signature")
        body, mac = blob[:-_MAC_SIZE], blob[-_MAC_SIZE:]
        if secret is not None and not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
            raise EntryRejected("signature", "HMAC does not match the configured key")
    elif secret is not None:
        raise EntryRejected("signature", "entry is unsigned and a signing key is configured")
    start = _HEADER.size + head_len
    if start > len(body):
        raise EntryRejected("size", "manifest runs past the end of the entry (truncated)")
    try:
        manifest = json.loads(body[_HEADER.size : start])
        files_meta = [(str(f["name"]), int(f["size"]), str(f["sha256"])) for f in manifest["files"]]
        found_key, found_versions = manifest["key"], dict(manifest["versions"])
    except (ValueError, KeyError, TypeError) as err:
        raise EntryRejected("format", f"unreadable manifest ({type(err).__name__})") from None
    if found_key != key:
        raise EntryRejected("key", f"entry is for key {str(found_key)[:16]}..., not {key[:16]}...")
    for name, expected in versions.items():
        if found_versions.get(name) != expected:
            raise EntryRejected("version", f"{name} {found_versions.get(name)!r} != local {expected!r}")
    if sum(size for _, size, _ in files_meta) != len(body) - start or any(size < 0 for _, size, _ in files_meta):
        raise EntryRejected(
            "size", f"payload is {len(body) - start} bytes, the manifest lists {sum(s for _, s, _ in files_meta)} (truncated or padded)"
        )
    files: dict[str, bytes] = {}
    offset = start
    for name, size, digest in files_meta:
        if not _FILE_NAME.fullmatch(name) or name in files:
            raise EntryRejected("format", f"bad or repeated file name {name!r}")
        data = body[offset : offset + size]
        offset += size
        if hashlib.sha256(data).hexdigest() != digest:
            raise EntryRejected("hash", f"{name}: content hash does not match the manifest")
        files[name] = data
    return Entry(found_key, {k: str(v) for k, v in found_versions.items()}, files)


def describe(blob: bytes) -> dict[str, object]:
    """Unverified manifest of a blob, for ``tilecore cache stats`` style listings only."""
    try:
        _magic, _fmt, _flags, head_len = _HEADER.unpack_from(blob)
        return dict(json.loads(blob[_HEADER.size : _HEADER.size + head_len]))
    except Exception:
        return {}
