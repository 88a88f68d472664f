"""The two Supervisor calls the add-on makes: its own IP address, and Wyoming discovery."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from typing import Any

_LOGGER = logging.getLogger(__name__)

SUPERVISOR_URL = "http://supervisor"


class SupervisorError(Exception):
    """A Supervisor API call failed."""


class SupervisorClient:
    """Minimal client of the Supervisor REST API, authenticated with SUPERVISOR_TOKEN."""

    def __init__(self, token: str, base_url: str = SUPERVISOR_URL, timeout: float = 10.0) -> None:
        self._token = token
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        # No proxy: "supervisor" is on the internal network, and an http_proxy set in
        # the environment must not capture the token.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self._base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                reply = json.loads(response.read() or b"{}")
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise SupervisorError(f"{method} {path}: {err}") from err
        if reply.get("result") != "ok":
            raise SupervisorError(f"{method} {path}: {reply.get('message') or reply}")
        return reply.get("data")

    def own_ipv4(self) -> str | None:
        """The add-on container's IPv4 address on the hassio network, if Supervisor says."""
        data = self._call("GET", "/addons/self/info") or {}
        address = data.get("ip_address")
        return str(address) if address and _is_ipv4(str(address)) else None

    def register_wyoming(self, uri: str, attempts: int = 5, delay_s: float = 2.0) -> None:
        """POST the discovery message that makes Home Assistant offer the integration."""
        payload = discovery_payload(uri)
        for attempt in range(1, attempts + 1):
            try:
                self._call("POST", "/discovery", payload)
                return
            except SupervisorError as err:
                if attempt == attempts:
                    raise
                # Supervisor may be restarting along with us after an update.
                _LOGGER.warning("Discovery attempt %d failed (%s); retrying", attempt, err)
                time.sleep(delay_s * attempt)


def discovery_payload(uri: str) -> dict[str, Any]:
    """The body Home Assistant's Wyoming integration expects (bashio::discovery wyoming)."""
    return {"service": "wyoming", "config": {"uri": uri}}


def _is_ipv4(text: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET, text)
    except OSError:
        return False
    return True


def route_ipv4(towards: str) -> str | None:
    """The local IPv4 address used to reach `towards` (a UDP connect sends no packet)."""
    try:
        target = socket.gethostbyname(towards)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((target, 9))
            address = sock.getsockname()[0]
    except OSError:
        return None
    return address if _is_ipv4(address) else None


def container_ipv4(client: SupervisorClient | None, supervisor_host: str = "supervisor") -> str | None:
    """Our IPv4 address as Home Assistant should use it.

    An address, not the hostname: Home Assistant has been seen resolving an add-on's
    hostname to an unroutable IPv6 address.
    """
    if client is not None:
        try:
            address = client.own_ipv4()
        except SupervisorError as err:
            _LOGGER.warning("Could not ask Supervisor for our address (%s)", err)
            address = None
        if address:
            return address
    return route_ipv4(supervisor_host)
