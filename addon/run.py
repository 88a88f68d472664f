#!/usr/bin/env python3
"""Entry point of the Home Assistant add-on and of the plain Docker image.

Reads /data/options.json (absent outside Home Assistant: defaults apply), starts the
server with the matching command line, and once the server answers `describe` with its
voices, registers Wyoming discovery with the Supervisor so that Home Assistant offers
the integration. Extra arguments (`docker run IMAGE --model french`) are appended to
the server's command line, and a setting they give replaces the options' value for it.

Environment (all optional): SUPERVISOR_TOKEN (set by the Supervisor; without it there
is no discovery and no voices page), POCKET_TTS_OPTIONS (options file, default /data/options.json),
POCKET_TTS_DATA_DIR (default /data), POCKET_TTS_SHARE_DIR (default /share/pocket_tts),
POCKET_TTS_PORT (default 10200; the health check reads it too), POCKET_TTS_INGRESS_PORT
(default 8099, config.yaml's ingress_port: the voices page, under the Supervisor only),
POCKET_TTS_SUPERVISOR_URL (default http://supervisor).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path, PurePosixPath

from addon_options import (
    ADDON_INGRESS_PORT,
    DEFAULT_PORT,
    Layout,
    OptionsError,
    ServerCommand,
    build_command,
    load_options,
    voices_dir_path,
)
from supervisor_api import SUPERVISOR_URL, SupervisorClient, SupervisorError, container_ipv4
from wyoming_probe import ProbeError, describe, tts_voice_names

_LOGGER = logging.getLogger("addon")

# How long the server may answer describe without listing a voice before we register
# anyway (a voice list that never fills must not leave Home Assistant without a server).
VOICES_TIMEOUT_S = 600.0
PROGRESS_EVERY_S = 30.0


def wait_until_ready(
    proc: subprocess.Popen,
    host: str,
    port: int,
    *,
    poll_s: float = 0.5,
    voices_timeout_s: float = VOICES_TIMEOUT_S,
) -> list[str] | None:
    """Voice names once the server lists some; None if the server exited first."""
    started = time.monotonic()
    last_progress = started
    first_answer: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        try:
            names = tts_voice_names(describe(host, port, timeout=2.0))
        except ProbeError:
            names = None
        if names:
            return names
        if names is not None:
            if first_answer is None:
                first_answer = now
                _LOGGER.info("The server answers; waiting for the model and its voices")
            elif now - first_answer > voices_timeout_s:
                _LOGGER.warning("No voice listed after %.0f s; registering anyway", voices_timeout_s)
                return []
        if now - last_progress >= PROGRESS_EVERY_S:
            last_progress = now
            _LOGGER.info(
                "Still starting after %.0f s (the first start downloads the model, a few "
                "hundred MB; the server's log above shows the progress)",
                now - started,
            )
        time.sleep(poll_s)
    return None


def announce(client: SupervisorClient | None, advertised_port: int) -> str | None:
    """Register discovery; returns the advertised URI, or None when nothing was sent."""
    if client is None:
        _LOGGER.info(
            "No SUPERVISOR_TOKEN: not running as a Home Assistant add-on, so no discovery. "
            "Add the Wyoming Protocol integration by hand with this host and port %d",
            advertised_port,
        )
        return None
    address = container_ipv4(client)
    if address is None:
        _LOGGER.error(
            "Could not find this add-on's IPv4 address: add the Wyoming Protocol "
            "integration by hand (host: this add-on's hostname, port %d)",
            advertised_port,
        )
        return None
    uri = f"tcp://{address}:{advertised_port}"
    try:
        client.register_wyoming(uri)
    except SupervisorError as err:
        _LOGGER.error("Discovery failed (%s): add the Wyoming Protocol integration by hand at %s", err, uri)
        return None
    _LOGGER.info(
        "Registered with Home Assistant as %s: Settings > Devices & services offers "
        "the discovered Wyoming Protocol integration",
        uri,
    )
    return uri


def _announce_when_ready(proc: subprocess.Popen, client: SupervisorClient | None, port: int) -> None:
    names = wait_until_ready(proc, "127.0.0.1", port)
    if names is None:
        return
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    _LOGGER.info("Ready: %d voice(s): %s", len(names), shown or "none")
    announce(client, port)


def supervise(command: ServerCommand, client: SupervisorClient | None, port: int = DEFAULT_PORT) -> int:
    """Run the server, announce it when ready, forward stop signals; its exit code."""
    _LOGGER.info("Starting the server: %s", command.printable())
    proc = subprocess.Popen(command.argv, env={**os.environ, **command.env})
    stopping = threading.Event()

    def forward(signum: int, _frame: object) -> None:
        # We are PID 1 in the container: docker stop's SIGTERM lands here, not on the server.
        stopping.set()
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        threading.Thread(
            target=_announce_when_ready,
            args=(proc, client, port),
            name="announce",
            daemon=True,
        ).start()
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopping.is_set() and code in (0, -signal.SIGTERM, -signal.SIGINT):
        _LOGGER.info("Server stopped")
        return 0
    if code < 0:
        _LOGGER.error("The server was killed by signal %d", -code)
        return 128 - code
    if code != 0:
        _LOGGER.error("The server exited with code %d: its log above says why", code)
    return code


def prepare_folders(options: dict, layout: Layout) -> None:
    """Create the voices folder so that users find where to put their recordings."""
    folder = voices_dir_path(options, layout)
    if folder is None:
        return
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _LOGGER.warning("Cannot create the voices folder %s (%s)", folder, err)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [add-on] %(message)s")
    env = os.environ
    layout = Layout(
        python=sys.executable,
        data_dir=PurePosixPath(env.get("POCKET_TTS_DATA_DIR", "/data")),
        share_dir=PurePosixPath(env.get("POCKET_TTS_SHARE_DIR", "/share/pocket_tts")),
        port=int(env.get("POCKET_TTS_PORT", DEFAULT_PORT)),
        # Under the Supervisor (it sets SUPERVISOR_TOKEN), the voices page behind ingress.
        ingress_port=int(env.get("POCKET_TTS_INGRESS_PORT", ADDON_INGRESS_PORT)) if env.get("SUPERVISOR_TOKEN")
        else None,
    )
    try:
        options = load_options(Path(env.get("POCKET_TTS_OPTIONS", str(layout.data_dir / "options.json"))))
    except OptionsError as err:
        _LOGGER.error("Bad configuration: %s", err)
        return 2
    if not options["hf_token"] and not env.get("HF_TOKEN"):
        _LOGGER.info(
            "No Hugging Face token: predefined voices work; cloning a voice from a "
            "recording needs a token (see the Documentation tab)"
        )
    prepare_folders(options, layout)
    token = env.get("SUPERVISOR_TOKEN")
    client = SupervisorClient(token, env.get("POCKET_TTS_SUPERVISOR_URL", SUPERVISOR_URL)) if token else None
    return supervise(build_command(options, layout, argv), client, layout.port)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
