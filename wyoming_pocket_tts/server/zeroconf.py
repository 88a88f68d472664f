"""Optional mDNS announcement (`_wyoming._tcp.local.`) so Home Assistant discovers the server.

Written against `zeroconf` directly rather than `wyoming.zeroconf` so that the service can
be unregistered cleanly at shutdown. The announced address is IPv4: Home Assistant has been
seen to resolve a host name to an unroutable IPv6 address.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

_LOGGER = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
# Any multicast address works: connecting a UDP socket sends nothing, it only picks a route.
_MDNS_ADDRESS = "224.0.0.251"


def zeroconf_available() -> bool:
    return importlib.util.find_spec("zeroconf") is not None


def _local_ipv4(bound_host: str | None) -> str:
    """The address to announce: the one we are bound to, or the default route's."""
    if bound_host:
        try:
            address = ipaddress.ip_address(bound_host)
        except ValueError:
            address = None
        if address is not None and address.version == 4 and not address.is_unspecified:
            return str(address)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((_MDNS_ADDRESS, 1))
        return str(probe.getsockname()[0])


@dataclass
class Announcement:
    """A registered service; `close()` withdraws it."""

    _zeroconf: Any
    _info: Any

    async def close(self) -> None:
        try:
            await self._zeroconf.async_unregister_service(self._info)
        finally:
            await self._zeroconf.async_close()


async def announce(uri: str, name: str) -> Announcement | None:
    """Register the server; on failure log a warning and carry on (discovery is a bonus)."""
    parsed = urlparse(uri)
    if parsed.scheme != "tcp" or parsed.port is None:
        _LOGGER.warning("Zeroconf needs a tcp:// URI; not announcing %s", uri)
        return None
    from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

    zc = None
    try:
        host = _local_ipv4(parsed.hostname)
        info = AsyncServiceInfo(
            SERVICE_TYPE,
            f"{name}.{SERVICE_TYPE}",
            addresses=[socket.inet_aton(host)],
            port=parsed.port,
        )
        zc = AsyncZeroconf()
        await zc.async_register_service(info)
    except Exception as err:  # noqa: BLE001 - no network, name clash, ...
        _LOGGER.warning("Zeroconf announcement failed, continuing without it: %s", err)
        if zc is not None:
            await zc.async_close()
        return None
    _LOGGER.info("Announced %s on %s:%s via zeroconf", name, host, parsed.port)
    return Announcement(zc, info)
