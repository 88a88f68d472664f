"""What the listening socket allows: how many connections, how much is buffered for each,
and what happens when the process runs out of file descriptors.

Anything on the home network can connect, so one client must not be able to make the
server unreachable (1,100 idle sockets used to exhaust the open-file limit of 1,024, and
asyncio then logged a traceback for every failed accept()):

* At start the soft RLIMIT_NOFILE is raised to the hard limit where allowed.
* At most `connection_cap` connections are open at once: the configured maximum, but never
  more than the file limit minus a reserve for the model, voices, logs and threads. One more
  is accepted only to be told why (an ``error`` event) and closed at once, so the listener
  never runs into EMFILE because of clients.
* One address holds at most a share of them (`address_share`: half), so that a device on
  the network that opens connections and keeps them (64 streams that never send text
  locked everyone out) cannot take them all. Home Assistant is usually one address, like
  any other here, and half the table (32 by default) is far more than it keeps open: one
  per reply being spoken, plus its short describes. IPv6 addresses count by their /64
  network (one device has many), an IPv4 address mapped into IPv6 as the IPv4 address; a
  Unix socket's clients are not shared out.
* Each connection's outgoing buffers are small (`bound_write_buffers`): together with the
  synthesis hand-off they bound how far a reply runs ahead of what its client has read.
* If accept() fails anyway (EMFILE, ENFILE, ENOBUFS, ENOMEM: asyncio retries after a
  second and reports each failure to the loop's exception handler, traceback included),
  `AcceptErrorLog` logs one warning per burst instead.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from wyoming.error import Error
from wyoming.event import Event
from wyoming.server import AsyncEventHandler

_LOGGER = logging.getLogger(__name__)

# File descriptors kept free for everything but client sockets (model and voice files,
# logs, the loader's downloads, torch's libraries).
RESERVED_FILES = 64
# Outgoing bytes buffered per connection in the process (asyncio's transport) and in the
# kernel (SO_SNDBUF; Linux doubles it for bookkeeping). An 80 ms audio chunk is ~3.9 KB, so
# both together hold about 2.5 s of audio; the client's own receive buffer comes on top.
WRITE_BUFFER_HIGH_BYTES = 32 * 1024
SOCKET_SEND_BUFFER_BYTES = 32 * 1024
# How long a refused client gets to take its `error` event before the socket is dropped.
REFUSAL_WRITE_TIMEOUT_S = 1.0
# Accept failures closer together than this belong to one burst (one warning).
ACCEPT_ERROR_BURST_GAP_S = 30.0
# asyncio's wording for a failed accept() (selector_events, all supported versions).
_ACCEPT_ERROR_MESSAGE = "socket.accept() out of system resource"


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one where allowed; return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as err:
            _LOGGER.debug("Cannot raise the open-file limit from %d to %d: %s", soft, hard, err)
        else:
            _LOGGER.debug("Open-file limit raised from %d to %d", soft, hard)
            soft = hard
    return soft


def connection_cap(max_connections: int, file_limit: int) -> int:
    """How many connections may be open: the maximum, with room left under the file limit."""
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    if file_limit == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, file_limit - RESERVED_FILES))


def address_share(cap: int) -> int:
    """How many of `cap` connections one address may hold (see the module docstring)."""
    return max(1, cap // 2)


def client_address(peername: Any) -> str | None:
    """The address a connection counts against (None: not shared out, e.g. a Unix socket)."""
    if not isinstance(peername, tuple) or not peername or not isinstance(peername[0], str):
        return None
    try:
        address = ipaddress.ip_address(peername[0].split("%", 1)[0])
    except ValueError:
        return peername[0]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def bound_write_buffers(writer: asyncio.StreamWriter) -> None:
    """Keep what is buffered for one client small (see the module docstring)."""
    writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BUFFER_BYTES)
        except OSError as err:  # not every socket type takes it; the transport bound remains
            _LOGGER.debug("Cannot set SO_SNDBUF: %s", err)


HandlerFactory = Callable[[asyncio.StreamReader, asyncio.StreamWriter], AsyncEventHandler]


class ConnectionGate:
    """A handler factory for wyoming's server that admits at most ``cap`` connections, and
    at most ``per_address`` of them from one address (default: `address_share`).

    Event-loop only. wyoming's server calls the factory for every accepted socket and runs
    the returned handler's ``run()`` (and ``stop()`` at shutdown).
    """

    def __init__(self, factory: HandlerFactory, cap: int, per_address: int | None = None) -> None:
        self._factory = factory
        self.cap = cap
        self.per_address = per_address if per_address is not None else address_share(cap)
        self.open = 0
        self.refused = 0
        self._by_address: Counter[str] = Counter()

    def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> AsyncEventHandler:
        bound_write_buffers(writer)
        address = client_address(writer.get_extra_info("peername"))
        if self.open >= self.cap:
            reason = f"too many connections open (limit {self.cap})"
        elif address is not None and self._by_address[address] >= self.per_address:
            reason = f"too many connections from your address (limit {self.per_address} of {self.cap})"
        else:
            self.open += 1
            if address is not None:
                self._by_address[address] += 1
            return _Counted(reader, writer, self._factory(reader, writer), self, address)
        self.refused += 1
        return _Refusal(reader, writer, self, reason)

    def closed(self, address: str | None = None) -> None:
        self.open -= 1
        if address is not None:
            self._by_address[address] -= 1
            if self._by_address[address] <= 0:
                del self._by_address[address]  # the table stays as small as the set of clients


class _Counted(AsyncEventHandler):
    """An admitted connection: runs the real handler, then frees its place."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handler: AsyncEventHandler,
        gate: ConnectionGate,
        address: str | None,
    ) -> None:
        super().__init__(reader, writer)
        self._handler = handler
        self._gate = gate
        self._address = address

    async def handle_event(self, event: Event) -> bool:
        return await self._handler.handle_event(event)

    async def run(self) -> None:
        try:
            await self._handler.run()
        finally:
            self._gate.closed(self._address)

    async def stop(self) -> None:
        await self._handler.stop()


class _Refusal(AsyncEventHandler):
    """A connection over the cap: one `error` event saying why, then the socket closes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: ConnectionGate,
                 reason: str) -> None:  # fmt: skip
        super().__init__(reader, writer)
        self._gate = gate
        self._reason = reason

    async def handle_event(self, event: Event) -> bool:
        return False

    async def run(self) -> None:
        gate = self._gate
        if gate.refused == 1 or gate.refused % 100 == 0:
            # Logged on the first and every 100th refusal: a flood must not flood the log.
            _LOGGER.warning("Refusing a connection: %s, %d open (%d refused so far)", self._reason, gate.open,
                            gate.refused)  # fmt: skip
        message = f"server busy: {self._reason}; try again later"
        try:
            await asyncio.wait_for(self.write_event(Error(text=message).event()), REFUSAL_WRITE_TIMEOUT_S)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            self.writer.transport.abort()
        self.writer.close()


class AcceptErrorLog:
    """A loop exception handler: one warning per burst of failed accept() calls.

    Everything else goes on to the handler that was installed before (or asyncio's default).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, burst_gap_s: float = ACCEPT_ERROR_BURST_GAP_S) -> None:
        self._previous = loop.get_exception_handler()
        self._burst_gap_s = burst_gap_s
        self._last_failure: float | None = None
        self._unreported = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_ERROR_MESSAGE:
            if self._previous is not None:
                self._previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        new_burst = self._last_failure is None or now - self._last_failure > self._burst_gap_s
        self._last_failure = now
        if not new_burst:
            self._unreported += 1
            return
        earlier = f" ({self._unreported} more in the previous burst)" if self._unreported else ""
        self._unreported = 0
        _LOGGER.warning(
            "Cannot accept connections: %s; retrying every second, quietly%s",
            context.get("exception") or "out of resources", earlier,
        )  # fmt: skip


def install_accept_error_log(loop: asyncio.AbstractEventLoop) -> None:
    """Route the loop's accept() failures through `AcceptErrorLog`."""
    loop.set_exception_handler(AcceptErrorLog(loop))
