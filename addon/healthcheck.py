#!/usr/bin/env python3
"""Docker HEALTHCHECK: healthy when the server answers describe with info.

Usage: healthcheck.py [HOST [PORT]]   (default 127.0.0.1, $POCKET_TTS_PORT or 10200)
Exit 0 when healthy, 1 otherwise; the reason goes to stderr, which Docker keeps in
`docker inspect` for the user to read.
"""

from __future__ import annotations

import os
import sys

from wyoming_probe import ProbeError, describe

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10200
# Home Assistant gives up on describe after 1 s; 5 s here tolerates a busy 2-core box
# without calling a wedged server healthy for long (Docker retries 3 times).
TIMEOUT_S = 5.0


def main(argv: list[str]) -> int:
    host = argv[0] if len(argv) > 0 else DEFAULT_HOST
    port = int(argv[1]) if len(argv) > 1 else int(os.environ.get("POCKET_TTS_PORT", DEFAULT_PORT))
    try:
        describe(host, port, timeout=TIMEOUT_S)
    except ProbeError as err:
        sys.stderr.write(f"unhealthy: {err}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
