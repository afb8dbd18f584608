"""Tuning records: the signed result of an autotuning sweep, kept in the remote store.

A record is small JSON (the best config, every config's status and latency, the device
class, producer versions) under ``<prefix><tilecore version>:tune:<key>``, where ``key``
hashes everything that decides the sweep's result.  It steers every reader to one
kernel, so it is signed with the cache's HMAC key exactly as entries are: a record that
is not signed with the reader's key (or not at all, when the reader has one) is refused.

Layout: ``b"TCTR" | u8 format | u8 flags | JSON | HMAC-SHA256 (32 bytes, when signed)``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

MAGIC = b"TCTR"
FORMAT = 1
FLAG_SIGNED = 0x01
_MAC = hashlib.sha256().digest_size


class RecordRejected(Exception):
    """A stored record that must not be used (``format``, ``signature`` or ``key``)."""


def encode(key: str, record: dict[str, Any], secret: bytes | None) -> bytes:
    body = json.dumps({"key": key, "record": record}, sort_keys=True, separators=(",", ":")).encode()
    head = MAGIC + bytes([FORMAT, FLAG_SIGNED if secret else 0])
    blob = head + body
    return blob + hmac.new(secret, blob, hashlib.sha256).digest() if secret else blob


def decode(blob: bytes, key: str, secret: bytes | None) -> dict[str, Any]:
    if len(blob) < 6 or blob[:4] != MAGIC or blob[4] != FORMAT:
        raise RecordRejected("format: not a tilecore tuning record of format 1")
    signed = bool(blob[5] & FLAG_SIGNED)
    if secret is not None:
        if not signed or len(blob) < 6 + _MAC:
            raise RecordRejected("signature: the record is not signed, and this reader has a signing key")
        body, mac = blob[:-_MAC], blob[-_MAC:]
        if not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
            raise RecordRejected("signature: the record is not signed with this reader's key")
        body = body[6:]
    elif signed:
        raise RecordRejected("signature: the record is signed, and this reader has no key to check it")
    else:
        body = blob[6:]
    try:
        data = json.loads(body)
    except ValueError as err:
        raise RecordRejected(f"format: {err}") from None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("record"), dict):
        raise RecordRejected("key: the record was stored under another key")
    record: dict[str, Any] = data["record"]
    return record
