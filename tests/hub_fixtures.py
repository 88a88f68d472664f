"""A local stand-in for the Hugging Face hub: huggingface_hub's own download code, pointed at
it with HF_ENDPOINT, fetches files from it as from huggingface.co (`/{repo}/resolve/{revision}/{path}`).
`released_model_files` makes the files of a released model, with random weights, at the
catalog's hub paths.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HubFiles = dict[tuple[str, str, str], bytes]


@dataclass
class LocalHub:
    """Serves `files` ({(repo, revision, path): bytes}); `hang` holds every request until
    `close` (a hub that never answers); `requests` records what was asked for. `port` 0:
    any free port (a hub that is "down" is one not started yet at a port chosen before)."""

    files: HubFiles = field(default_factory=dict)
    hang: bool = False
    requests: list[tuple[str, str]] = field(default_factory=list)
    port: int = 0

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

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()


def released_model_files(name: str, folder: Path, seed: int = 0) -> HubFiles:
    """The files that loading catalog model `name` downloads, at the catalog's hub paths:
    its tokenizer (made here, of the model's vocabulary size), random weights at the path
    of the release without voice cloning (the gated one is left out, as a hub without a
    token shows it), and its default voice's state. Built in `folder`."""
    from safetensors.torch import load_file, save_file

    from engine_fixtures import write_voice_recording
    from tokenizer_fixtures import make_sentencepiece_model
    from wyoming_pocket_tts.engine.catalog import catalog
    from wyoming_pocket_tts.engine.config import parse_config
    from wyoming_pocket_tts.engine.demo import make_tokenizer_json
    from wyoming_pocket_tts.engine.hub import HubPath
    from wyoming_pocket_tts.engine.loading import build_model
    from wyoming_pocket_tts.engine.network import PocketNetwork, random_weights

    entry = catalog()[name]
    raw = copy.deepcopy(entry.config)
    lookup = raw["flow_lm"]["lookup_table"]
    folder.mkdir(parents=True, exist_ok=True)
    if lookup["tokenizer"] == "sentencepiece":
        tokenizer = make_sentencepiece_model(folder / "tokenizer.model", lookup["n_bins"])
    else:
        tokenizer = make_tokenizer_json(folder / "tokenizer.json", lookup["n_bins"])
    files = {_key(HubPath.parse(lookup["tokenizer_path"])): tokenizer.read_bytes()}
    network = PocketNetwork(parse_config(raw))
    random_weights(network, seed)
    weights = folder / "model.safetensors"
    save_file({key: value.contiguous() for key, value in network.state_dict().items()}, str(weights))
    files[_key(HubPath.parse(raw["weights_path_without_voice_cloning"]))] = weights.read_bytes()
    # The default voice as the release stores it (tensors, no metadata of ours), made by
    # the same random model from a recording.
    local = {**raw, "weights_path": str(weights), "weights_path_without_voice_cloning": None}
    local["flow_lm"] = {**raw["flow_lm"], "lookup_table": {**lookup, "tokenizer_path": str(tokenizer)}}
    model = build_model(local, name=name)
    recording = write_voice_recording(folder / "voice.wav", seconds=1.0)
    saved = folder / "state.safetensors"
    model.save_voice(model.voice_from_recording(recording), saved)
    save_file(load_file(saved), folder / "released.safetensors")
    voice = entry.voices[0]
    files[_key(HubPath.parse(entry.voice_state_path(voice)))] = (folder / "released.safetensors").read_bytes()
    return files


def _key(path: Any) -> tuple[str, str, str]:
    return (path.repo_id, path.revision or "main", path.filename)
