"""Remote cache URLs: parsing, tilecore's own query options, and redaction for messages.

A remote cache is named by one URL, e.g. ``redis://cache.internal:6379/0?ttl=604800``.
The scheme picks the store (see :mod:`tilecore.remote.store`); the query may carry
tilecore's tier options (:data:`TIER_OPTIONS`), which are removed before the URL is
handed to the store.  Everything else in the URL belongs to the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from tilecore.errors import TilecoreError

#: Query keys that configure the tier itself (not the store); values in seconds or bytes.
TIER_OPTIONS = (
    "ttl",
    "timeout",
    "deadline",
    "connect_timeout",
    "max_entry_bytes",
    "max_bytes",
    "prefix",
    "retry_after",
    "flush_timeout",
    "max_pending",
    "publish",
)

#: Query keys whose values are secrets (never printed).
_SECRET_QUERY_KEYS = ("password", "pass", "passwd", "token", "secret", "key", "access_key", "secret_key", "username", "user", "auth")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


class RemoteURLError(TilecoreError):
    """A remote cache URL that cannot be used."""


@dataclass(frozen=True)
class ParsedURL:
    scheme: str
    store_url: str  # the URL without tilecore's tier options, credentials intact
    options: dict[str, str]  # tilecore's tier options found in the query


def parse(url: str) -> ParsedURL:
    """Split ``url`` into its scheme, the store's URL and tilecore's tier options."""
    try:
        return _parse(url)
    except ValueError as err:  # urllib's own complaints (e.g. "Invalid IPv6 URL")
        raise RemoteURLError(
            f"remote cache URL {redact(url)!r} cannot be parsed ({err}). Write e.g. redis://user:password@host:6379/0 "
            f"(TILECORE_REMOTE_CACHE or tilecore.remote.configure(url=...))."
        ) from None


def _parse(url: str) -> ParsedURL:
    parts = urlsplit(url.strip())
    if not parts.scheme or "://" not in url:
        raise RemoteURLError(
            f"remote cache URL {redact(url)!r} has no scheme; write e.g. redis://host:6379/0 "
            f"(TILECORE_REMOTE_CACHE or tilecore.remote.configure(url=...))."
        )
    _check_shape(url.strip())
    store_query = []
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in TIER_OPTIONS:
            options[name] = value
        else:
            store_query.append((name, value))
    store_url = _unsplit(parts.scheme, parts.netloc, parts.path, urlencode(store_query), parts.fragment)
    return ParsedURL(parts.scheme.lower(), store_url, options)


def _check_shape(url: str) -> None:
    """Refuse the shapes a URL parser would split somewhere unexpected (and so might put a
    password where a host or path is expected): unencoded delimiters in the credentials,
    white space, a port that is not a number."""
    rest = url.split("://", 1)[1]
    userinfo, at, hostpart = rest.rpartition("@")
    problem = ""
    if any(ch.isspace() for ch in url):
        problem = "contains white space"
    elif at and any(ch in userinfo for ch in "/?#@[]"):
        problem = "has '/', '?', '#', '@' or brackets in its user name or password; percent-encode them (e.g. %23 for #, %40 for @)"
    else:
        netloc = urlsplit("x://" + hostpart).netloc
        port = netloc.rpartition("]")[2].partition(":")[2]
        if port and not port.isdigit():
            problem = "has a port that is not a number"
    if problem:
        raise RemoteURLError(
            f"remote cache URL {redact(url)!r} {problem}. Write e.g. redis://user:password@host:6379/0 "
            f"(TILECORE_REMOTE_CACHE or tilecore.remote.configure(url=...))."
        )


def _unsplit(scheme: str, netloc: str, path: str, query: str, fragment: str) -> str:
    """``urlunsplit`` that keeps ``//`` for host-less URLs (``dir:///srv/cache``)."""
    text = urlunsplit((scheme, netloc, path, query, fragment))
    if not netloc:
        text = f"{scheme}://{text[len(scheme) + 1 :]}"
    return text


def redact(url: str) -> str:
    """``url`` without user name, password, secret query values and fragment: safe for logs.

    Malformed URLs are redacted conservatively (hiding too much rather than too little):
    everything up to the *last* ``@`` is taken as credentials, whatever characters it holds
    (``#``, ``/``, ``?``, ``@``, spaces, percent escapes), and a port that is not a number is
    hidden, since a ``user:password`` without ``@`` parses as ``host:port``."""
    try:
        return _redact(url)
    except Exception:  # never let a message crash on a malformed URL
        return "<unparseable remote cache URL>"


def _redact(url: str) -> str:
    text = url.strip()
    match = _SCHEME.match(text)
    if match is None:
        return "<remote cache URL without scheme>"
    scheme, rest = match.group(1), text[match.end() :]
    rest = rest.rpartition("@")[2]
    parts = urlsplit(f"{scheme}://{rest}")
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port_text = parts.netloc.rpartition("]")[2].partition(":")[2] if parts.netloc else ""
    netloc = host if not port_text else f"{host}:{port_text}" if port_text.isdigit() else f"{host}:***"
    query = [(k, "***" if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return _unsplit(scheme, netloc, parts.path, urlencode(query, safe="*"), "")


def secrets_of(url: str) -> list[str]:
    """Every substring of ``url`` that may be a credential, raw and percent-decoded, longest
    first: the user information (all before the last ``@`` after the scheme) and its parts,
    a non-numeric port, the fragment, and the values of secret query keys."""
    text = url.strip()
    match = _SCHEME.match(text)
    rest = text[match.end() :] if match else text
    found: set[str] = set()
    if "@" in rest:
        userinfo = rest.rpartition("@")[0]
        found.update((userinfo, *userinfo.split(":", 1)))
    if "#" in rest:
        found.add(rest.partition("#")[2])
    try:
        parts = urlsplit(f"x://{rest.rpartition('@')[2]}")
        port_text = parts.netloc.rpartition("]")[2].partition(":")[2]
        if port_text and not port_text.isdigit():
            found.add(port_text)
        found.add(parts.fragment)
        for key, value in parse_qsl(urlsplit(f"x://{rest}").query, keep_blank_values=True):
            if key.lower() in _SECRET_QUERY_KEYS:
                found.add(value)
    except ValueError:  # unparseable: every piece of it may be a secret
        found.update(piece for piece in re.split(r"[:@/?#&=\[\]\s]+", rest) if len(piece) >= 3)
    for value in list(found):
        found.update((unquote(value), quote(value, safe=""), value.strip()))
    return sorted((s for s in found if s.strip()), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (an error message, a client's exception) with every credential of ``url`` masked.

    Secrets of three or more characters are masked wherever they occur; shorter ones only
    as whole words (masking every ``a`` of a message would make it unreadable)."""
    if not url:
        return text
    try:
        return _scrub(text, url)
    except Exception:  # never let a message crash; hide it all rather than leak
        return "<message hidden: it may contain the remote cache URL's credentials>"


def _scrub(text: str, url: str) -> str:
    text = text.replace(url, redact(url)).replace(url.strip(), redact(url))
    for secret in secrets_of(url):
        if len(secret) >= 3:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "***", text)
    return text
