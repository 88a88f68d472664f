"""The voices page's settings (scope "web" in `wyoming_pocket_tts.settings`), validated.

Imports nothing heavy: the command line builds this before the server starts, and
`--help` must stay fast. The page itself (aiohttp) is imported only when it is turned on.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

from ..settings import SettingError, check_fields

# Where the token comes from when --http-token is not given (argv is visible in `ps`).
TOKEN_ENV = "POCKET_TTS_HTTP_TOKEN"


@dataclass(frozen=True)
class WebConfig:
    """Where the voices page listens and who may use it.

    Three ways to be reached, checked on every request (see `web.guard`):
    - behind Home Assistant's ingress (`ingress_proxy`): only that address may connect;
    - with a `token`: every request must carry it (cookie, header or ?token= once);
    - neither: loopback only, so only this machine's browser can open it.
    """

    listen: str
    token: str | None = None
    ingress_proxy: str | None = None

    def __post_init__(self) -> None:
        check_fields("web", self)
        self.address  # parses, or raises SettingError
        if self.ingress_proxy is not None:
            try:
                ipaddress.ip_address(self.ingress_proxy)
            except ValueError:
                raise SettingError(f"http_ingress: {self.ingress_proxy!r} is not an IP address") from None
        if self.token is None and self.ingress_proxy is None and not self.loopback:
            raise SettingError(
                f"http: {self.listen} can be reached from other machines; give --http-token (or "
                f"${TOKEN_ENV}) so that only you can open the voices page, or listen on 127.0.0.1"
            )

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) to listen on."""
        host, _, port_text = self.listen.rpartition(":")
        host = host.strip("[]")
        port = int(port_text)
        if not host or not 0 < port < 65536:
            raise SettingError(f"http: {self.listen!r} is not HOST:PORT with a port from 1 to 65535")
        return host, port

    @property
    def loopback(self) -> bool:
        """True if only this machine can connect (127.0.0.0/8, ::1, localhost)."""
        host = self.address[0]
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def web_config(listen: str | None, token: str | None, ingress_proxy: str | None) -> WebConfig | None:
    """The page's config from the command line's values (None: the page is off); raises
    SettingError for a token or ingress address given without --http."""
    if listen is None:
        for flag, value in (("--http-token", token), ("--http-ingress", ingress_proxy)):
            if value is not None:
                raise SettingError(f"{flag} needs --http HOST:PORT (where the voices page listens)")
        return None
    return WebConfig(listen=listen, token=token or os.environ.get(TOKEN_ENV) or None, ingress_proxy=ingress_proxy)
