"""Stand-in for `python -m wyoming_pocket_tts` in the add-on tests.

Records its command line and the environment variables the add-on sets into the file
named by FAKE_SERVER_RECORD, then answers `describe` on the `--uri` it was given with
one TTS program and one voice, like the real server once it is ready. With
FAKE_SERVER_EXIT set, it exits at once with that code instead (a server that fails).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer

_ATTRIBUTION = Attribution(name="tests", url="https://example.invalid")
INFO = Info(
    tts=[
        TtsProgram(
            name="pocket-tts",
            description="fake",
            attribution=_ATTRIBUTION,
            installed=True,
            version="0.0.0",
            voices=[
                TtsVoice(
                    name="alba",
                    description="fake voice",
                    attribution=_ATTRIBUTION,
                    installed=True,
                    version=None,
                    languages=["en"],
                )
            ],
            supports_synthesize_streaming=True,
        )
    ]
)


class Handler(AsyncEventHandler):
    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(INFO.event())
        return True


def main() -> None:
    argv = sys.argv[1:]
    record = os.environ.get("FAKE_SERVER_RECORD")
    if record:
        env = {key: os.environ.get(key) for key in ("HF_TOKEN", "HF_HOME")}
        with open(record, "w", encoding="utf-8") as out:
            json.dump({"argv": argv, "env": env}, out)
    if os.environ.get("FAKE_SERVER_EXIT"):
        sys.exit(int(os.environ["FAKE_SERVER_EXIT"]))
    uri = argv[argv.index("--uri") + 1]
    asyncio.run(AsyncServer.from_uri(uri).run(Handler))


if __name__ == "__main__":
    main()
