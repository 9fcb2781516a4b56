"""What a web page in the user's browser may not do to a local server.

A server in open mode (no API keys) trusts whoever can reach it, which for a loopback
server means the user's own programs, but also every web page the user's browser shows:

- **DNS rebinding**: a page on ``evil.example`` whose name resolves to 127.0.0.1 reads
  and writes as if it were local. Open mode answers only requests whose ``Host`` is a
  loopback name (or one in ``[server] allowed_hosts``); with keys, ``allowed_hosts``
  restricts the names when it is set.
- **Cross-site requests**: a page may POST to ``http://127.0.0.1:8765`` without a
  preflight (``text/plain`` bodies). A request that changes something is refused when
  the browser says it comes from another site (``Sec-Fetch-Site: cross-site``, or an
  ``Origin`` that is not the server's own nor in ``[server] allowed_origins``).
Programs that are not browsers send neither header and are not affected.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from urllib.parse import unquote_to_bytes, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from loci.server import errors

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Host`` values remembered as allowed (loopback or listed names, with their ports).
HOSTS_REMEMBERED = 64


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _utf8(raw_path: bytes) -> bool:
    """Whether a percent-encoded path decodes to UTF-8."""
    try:
        unquote_to_bytes(raw_path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class Guard:
    """Refuses foreign ``Host`` names (421), cross-site changes (403) and paths that
    are no UTF-8 (400: decoded, ``%FF`` and ``%EF%BF%BD`` would name the same session)."""

    def __init__(self, app: ASGIApp, keys_required: Callable[[], bool],
                 allowed_hosts: list[str], allowed_origins: list[str]) -> None:
        self.app = app
        self.keys_required = keys_required
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        self.allowed_origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
        self._hosts_seen: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host not in self._hosts_seen and not self._host_allowed(host):
            await errors.send_error(
                send, 421, "MisdirectedRequest", f"host {host!r} is not served here: "
                "loopback names and [server] allowed_hosts only (any name once API keys "
                "exist and allowed_hosts is empty)")
            return
        if scope["method"] not in _SAFE_METHODS and not self._same_site(headers, host):
            await errors.send_error(
                send, 403, "CrossSiteRequest", "a web page of another site may not change "
                "data here (add its origin to [server] allowed_origins to allow it)")
            return
        path = scope["path"]
        if ("\ufffd" in path and not _utf8(scope.get("raw_path") or b"")) or (
                _CONTROL.search(path)):  # a route's match would drop a final newline
            await errors.send_error(send, 400, "ValidationError", "the request's path is "
                                    "not UTF-8 once decoded, or holds a control character")
            return
        await self.app(scope, receive, send)

    def _host_allowed(self, host: str) -> bool:
        name = host_name(host)
        if name in LOOPBACK_NAMES or name in self.allowed_hosts:
            if len(self._hosts_seen) < HOSTS_REMEMBERED:
                self._hosts_seen.add(host)  # allowed whatever the keys: skip next time
            return True
        if self.allowed_hosts:
            return False
        return self.keys_required()

    def _same_site(self, headers: dict[bytes, bytes], host: str) -> bool:
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1").lower().rstrip("/")
            return text in self.allowed_origins or (
                text != "null" and _netloc(text) == host)
        return headers.get(b"sec-fetch-site") != b"cross-site"


def _netloc(url: str) -> str | None:
    """The host and port of ``url``; None if it does not parse (``http://[::1``)."""
    try:
        return urlsplit(url).netloc
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether a bind address or host name is the machine's own."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """The name of a ``Host`` header, without its port."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
