"""A local stand-in for the Hugging Face hub: huggingface_hub's own download code, pointed at
it with HF_ENDPOINT, fetches files from it as from huggingface.co (`/{repo}/resolve/{revision}/{path}`).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class LocalHub:
    """Serves `files` ({(repo, revision, path): bytes}); `hang` holds every request until
    `close` (a hub that never answers); `requests` records what was asked for."""

    files: dict[tuple[str, str, str], bytes] = field(default_factory=dict)
    hang: bool = False
    requests: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        hub = self
        self._closing = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                hub.requests.append((self.command, self.path))
                if hub.hang:
                    hub._closing.wait(120)
                    return
                parts = self.path.lstrip("/").split("/", 4)
                if len(parts) < 5 or parts[2] != "resolve":
                    return self._missing()
                repo, revision, path = f"{parts[0]}/{parts[1]}", parts[3], parts[4]
                content = hub.files.get((repo, revision, path))
                if content is None:
                    return self._missing()
                self.send_response(200)
                self.send_header("X-Repo-Commit", revision)
                self.send_header("ETag", f'"{hashlib.sha256(content).hexdigest()}"')
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if body:
                    self.wfile.write(content)

            def _missing(self) -> None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
