"""Who may use the voices page, checked on every request before any handler runs.

1. Behind Home Assistant's ingress (`--http-ingress`): only the ingress proxy's address may
   connect (Home Assistant has signed the user in; the Supervisor's documentation says an
   add-on must accept nothing else).
2. With a token (`--http-token`): every request carries it, as the session cookie the page
   sets after it was opened once with `?token=...` (HttpOnly, SameSite=Strict: a page of
   another site cannot send it), or as `Authorization: Bearer TOKEN` (scripts).
3. Neither: the page listens on loopback only (checked at start, see WebConfig); the
   Host header must then name this machine too, so that another site's name pointed at
   127.0.0.1 (DNS rebinding) is not served.

And whatever the mode, a request that changes something (POST, PATCH, DELETE) must carry
the page's own CSRF token in a header (a page of another site can neither read it nor
send a custom header without a CORS preflight, which is never granted), and must not
come from another origin (Origin, Sec-Fetch-Site).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web

from .config import WebConfig

_LOGGER = logging.getLogger(__name__)

SESSION_COOKIE = "pocket_tts_session"
CSRF_HEADER = "X-CSRF-Token"
SESSION_DAYS = 30
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: HTTP status, a code for the page's translations, English."""

    status: int
    code: str
    message: str


@dataclass
class Guard:
    config: WebConfig
    # Per server process: a page opened before a restart reloads to get the new one.
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def session_value(self) -> str | None:
        """The session cookie's value: derived from the token, so the token itself is never
        stored in the browser's cookie jar."""
        if self.config.token is None:
            return None
        return hmac.new(self.config.token.encode(), b"voices-page-session", hashlib.sha256).hexdigest()

    def refusal(self, request: web.Request) -> Refusal | None:
        """None if the request may go on."""
        peer = request.remote or ""
        if self.config.ingress_proxy is not None and not _same_address(peer, self.config.ingress_proxy):
            _LOGGER.warning("voices page: request from %s refused (only the ingress proxy %s may connect)",
                            peer, self.config.ingress_proxy)  # fmt: skip
            return Refusal(403, "not_ingress", "this page opens through Home Assistant only (the add-on's "
                           f"'Open web UI', or its sidebar entry); requests from {peer} are refused")
        if self.config.token is not None:
            # The page itself may be opened with ?token= once (it then sets the cookie).
            opening = request.path == "/" and request.method == "GET" and self.token_in_query(request)
            if not (opening or self.has_token(request)):
                return Refusal(401, "token_needed", "this page needs its token: open it as "
                               "http://HOST:PORT/?token=YOUR_TOKEN (the --http-token given to the server)")
        elif self.config.ingress_proxy is None:
            if not _is_loopback(peer):
                return Refusal(403, "not_local", f"this page answers this machine only; {peer} is refused")
            host = (request.host or "").rsplit(":", 1)[0].strip("[]").lower() if request.host else ""
            if not (host in _LOOPBACK_NAMES or _is_loopback(host)):
                return Refusal(403, "bad_host", f"this page answers as localhost only, not as {request.host!r}")
        if request.method not in _SAFE_METHODS:
            return self._cross_site(request)
        return None

    def has_token(self, request: web.Request) -> bool:
        token, session = self.config.token, self.session_value
        assert token is not None and session is not None
        cookie = request.cookies.get(SESSION_COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), session.encode()):
            return True
        authorization = request.headers.get("Authorization", "")
        if authorization.startswith("Bearer "):
            return hmac.compare_digest(authorization[7:].strip().encode(), token.encode())
        return False

    def token_in_query(self, request: web.Request) -> bool:
        """The page's URL carries the right ?token= (the first visit)."""
        given = request.query.get("token", "")
        return bool(self.config.token) and bool(given) and hmac.compare_digest(
            given.encode(), str(self.config.token).encode())  # fmt: skip

    def set_session(self, response: web.StreamResponse) -> None:
        value = self.session_value
        if value is not None:
            response.set_cookie(SESSION_COOKIE, value, max_age=SESSION_DAYS * 86400, httponly=True,
                                samesite="Strict", path="/")  # fmt: skip

    def _cross_site(self, request: web.Request) -> Refusal | None:
        given = request.headers.get(CSRF_HEADER, "")
        if not given or not hmac.compare_digest(given.encode(), self.csrf_token.encode()):
            return Refusal(403, "csrf", "this change did not come from the voices page itself (or the page is "
                           "older than the server's last start): reload the page and try again")
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return Refusal(403, "cross_site", "a request from another site is refused")
        origin = request.headers.get("Origin")
        # Behind ingress the proxies may rewrite Host (a reverse proxy in front of Home
        # Assistant): the proxy's address, the CSRF token and Sec-Fetch-Site suffice there.
        if origin and origin != "null" and self.config.ingress_proxy is None:
            origin_host = urlsplit(origin).netloc.lower()
            hosts = {(request.host or "").lower()}
            forwarded = request.headers.get("X-Forwarded-Host")
            if forwarded:
                hosts.add(forwarded.split(",")[0].strip().lower())
            if origin_host not in hosts:
                return Refusal(403, "cross_site", f"a request from {origin} is refused")
        return None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _same_address(peer: str, expected: str) -> bool:
    try:
        ours = ipaddress.ip_address(peer.split("%", 1)[0])
        if isinstance(ours, ipaddress.IPv6Address) and ours.ipv4_mapped is not None:
            ours = ours.ipv4_mapped
        return ours == ipaddress.ip_address(expected)
    except ValueError:
        return False
