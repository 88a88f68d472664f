"""The voices page: record, upload, preview and tune the household's voices in a browser.

Served by the server process itself (aiohttp) when `--http HOST:PORT` is given, and by the
add-on behind Home Assistant's ingress. Torch-free; it imports core/, settings, the
torch-free parts of voices/, and talks to the server through `link.VoiceServer` (which
server/web_link.py implements) and, for previews, over Wyoming like any client.

Modules: config (the settings), guard (who may use it), app (routes), store (writes to
the voices file and folder), decode (uploads to samples), quality (the pre-save check),
preview (Wyoming to a WAV stream), strings (translations), static/ (the page itself).
"""
